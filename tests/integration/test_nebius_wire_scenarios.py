"""The cloud-port scenario suite, run against every adapter backend.

`nebius` runs through the official SDK to the loopback gRPC fake (tests/wire); `local` runs against the
embedded simulator when it exists. Both are seeded from the same tenant fixture, so each scenario
asserts what any faithful adapter must do. Wire-only behaviour (retries, idempotency keys, auth
metadata, profiles) lives in test_nebius_wire_behaviour.py.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from wire.backends import REGION, Backend, backend_kinds, open_backend
from wire.coverage import covers, declared

from npa_pulumi.cloud.errors import CloudError, NotFound, PermissionDenied
from npa_pulumi.cloud.port import BUCKET_OBJECT_ROLE

pytestmark = pytest.mark.integration

GIB = 1024**3


@pytest.fixture(params=backend_kinds())
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    with open_backend(request.param, tmp_path, monkeypatch) as b:
        yield b
        missing = declared(request.function) - b.cloud.called
        assert not missing, (
            f"{request.function.__name__} declares coverage of {sorted(missing)} but never calls them"
        )


@covers("principal", "list_projects", "get_project", "create_project")
def test_project_create_then_verify(backend: Backend) -> None:
    cloud = backend.cloud
    me = cloud.principal()
    assert me.tenant_id == backend.tenant_id

    before = {p.name: p for p in cloud.list_projects(backend.tenant_id)}
    assert before["existing"].id == "project-e00existing"
    assert before["existing"].region == REGION

    created = cloud.create_project(backend.tenant_id, "fleet1-test-a", REGION, labels={"npa:fleet": "fleet1"})
    assert created.id.startswith("project-")
    assert (created.name, created.tenant_id, created.region) == ("fleet1-test-a", backend.tenant_id, REGION)
    assert created.state == "ACTIVE"
    assert created.suspension_state == "NONE"
    assert created.labels.get("npa:fleet") == "fleet1"

    # Verification is a provider read of the exact id, as preflight does.
    assert cloud.get_project(created.id) == created
    after = {p.id for p in cloud.list_projects(backend.tenant_id)}
    assert after == {p.id for p in before.values()} | {created.id}

    with pytest.raises(NotFound) as err:
        cloud.get_project("project-e00missing")
    assert err.value.request is not None and "project-e00missing" in err.value.request.params.values()


@covers(
    "list_networks",
    "get_network",
    "create_network",
    "delete_network",
    "list_subnets",
    "get_subnet",
    "create_subnet",
    "delete_subnet",
)
def test_subnet_reuse_or_create(backend: Backend) -> None:
    cloud = backend.cloud
    project = "project-e00existing"
    assert cloud.list_subnets(project) == []
    assert cloud.list_networks(project) == []

    network = cloud.create_network(project, "fleet1-net")
    assert network.id.startswith("vpcnetwork-") and network.project_id == project and network.state == "READY"
    subnet = cloud.create_subnet(project, network.id, "fleet1-subnet")
    assert subnet.id.startswith("vpcsubnet-")
    assert (subnet.project_id, subnet.network_id, subnet.state) == (project, network.id, "READY")
    assert subnet.cidr

    # A second resolution reuses what exists instead of creating again.
    reused = [s for s in cloud.list_subnets(project) if s.name == "fleet1-subnet"]
    assert [s.id for s in reused] == [subnet.id]
    assert cloud.get_subnet(subnet.id) == subnet
    assert cloud.get_network(network.id) == network
    assert [n.id for n in cloud.list_networks(project)] == [network.id]

    # An owned pair is reclaimed subnet first, then network.
    cloud.delete_subnet(subnet.id)
    cloud.delete_network(network.id)
    assert cloud.list_subnets(project) == []
    assert cloud.list_networks(project) == []
    with pytest.raises(NotFound):
        cloud.get_subnet(subnet.id)


@covers("default_region")
def test_default_region_is_the_profiles(backend: Backend) -> None:
    # nebius: the region of the profile's `parent-id` project; local: the local tenant's first region.
    assert backend.cloud.default_region() == REGION


@covers("object_storage_endpoint")
def test_the_object_storage_endpoint_serves_the_clouds_buckets(backend: Backend) -> None:
    """`backend init` puts its state bucket behind this endpoint: it must be the S3 endpoint that serves the
    cloud's buckets (nebius: the one the adapter's own S3 calls use, here the fake's; local: its own S3
    server, started on demand, answering S3's errors to an unsigned request)."""
    endpoint = backend.cloud.object_storage_endpoint(REGION)
    if backend.kind == "nebius":
        settings = backend.cloud.settings
        assert endpoint == (settings.storage_endpoint or f"https://storage.{REGION}.nebius.cloud").rstrip("/")
        return
    from npa_pulumi.simulator import seaweedd

    directory = backend.cloud.directory
    try:
        assert endpoint.startswith("http://127.0.0.1:"), endpoint
        assert backend.cloud.object_storage_endpoint(REGION) == endpoint  # the same server, not a second
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{endpoint}/any-bucket", timeout=10)
        assert refused.value.code == 403 and b"<Error>" in refused.value.read()
    finally:
        seaweedd.stop(directory)  # the server it started outlives nothing of the test
    assert not seaweedd.is_running(directory)


@covers("list_quota_allowances")
def test_allowances_listed_to_completion(backend: Backend) -> None:
    allowances = backend.cloud.list_quota_allowances(backend.tenant_id)
    assert len(allowances) == 7  # the fake serves them two per page

    scoped = {(q.name, q.parent_id): q for q in allowances}
    tenant_instances = scoped[("compute.instance.count", backend.tenant_id)]
    assert (tenant_instances.limit, tenant_instances.usage, tenant_instances.unit) == (100, 3, "count")
    assert tenant_instances.state == "ACTIVE"
    assert tenant_instances.region == REGION
    assert scoped[("compute.instance.count", "project-e00existing")].limit == 10
    assert scoped[("compute.instance.count", "")].limit == 5

    gpu = scoped[("compute.instance.gpu.h100", backend.tenant_id)]
    assert gpu.limit == 0 and gpu.usage == 0
    assert gpu.usage_state == "NOT_USED"

    disk = scoped[("compute.disk.size.network-ssd", backend.tenant_id)]
    assert disk.unit == "byte" and disk.limit == 10 * 1024**4
    assert disk.usage is None
    assert disk.usage_percentage == pytest.approx(0.25)

    assert scoped[("vpc.network.count", backend.tenant_id)].limit is None  # unlimited


@covers("list_capacity_block_groups", "get_capacity_block_group")
def test_capacity_block_reads(backend: Backend) -> None:
    cloud = backend.cloud
    blocks = {b.id: b for b in cloud.list_capacity_block_groups(backend.tenant_id)}
    assert set(blocks) == {"capacityblockgroup-e00h100", "capacityblockgroup-e00rtx"}

    h100 = cloud.get_capacity_block_group("capacityblockgroup-e00h100")
    assert h100 == blocks["capacityblockgroup-e00h100"]
    assert (h100.parent_id, h100.region, h100.platform, h100.fabric) == (
        backend.tenant_id,
        REGION,
        "gpu-h100-sxm",
        "fabric-3",
    )
    assert (h100.state, h100.limit, h100.usage) == ("ACTIVE", 16, 8)

    rtx = blocks["capacityblockgroup-e00rtx"]
    assert rtx.usage is None  # only a percentage is known
    assert rtx.usage_percentage == pytest.approx(0.5)

    with pytest.raises(NotFound):
        cloud.get_capacity_block_group("capacityblockgroup-e00missing")


@covers(
    "find_bucket",
    "create_bucket",
    "get_bucket",
    "probe_bucket",
    "delete_bucket",
    "create_service_account",
    "create_access_key",
    "grant_bucket_access",
)
def test_bucket_create_read_back_probe_delete(backend: Backend) -> None:
    cloud = backend.cloud
    project = "project-e00existing"
    assert cloud.find_bucket(project, "fleet1-artifacts") is None

    bucket = cloud.create_bucket(
        project, "fleet1-artifacts", "enhanced_throughput", 2 * GIB, labels={"a": "b"}
    )
    assert bucket.id.startswith("bucket-")
    read_back = cloud.get_bucket(bucket.id)
    assert read_back == bucket
    assert (read_back.project_id, read_back.name, read_back.region) == (project, "fleet1-artifacts", REGION)
    assert (read_back.storage_class, read_back.max_size_bytes) == ("enhanced_throughput", 2 * GIB)
    assert (read_back.state, read_back.suspension_state) == ("ACTIVE", "NOT_SUSPENDED")
    assert cloud.find_bucket(project, "fleet1-artifacts") == bucket

    account = cloud.create_service_account(project, "npa-fleet-storage")
    key = cloud.create_access_key(project, account.id)
    # A key whose account holds no grant on the bucket cannot touch it: the probe proves the grant.
    with pytest.raises(PermissionDenied, match="AccessDenied"):
        cloud.probe_bucket(bucket, key)
    grant = cloud.grant_bucket_access(project, bucket.id, account.id, "npa-fleet-storage-access")
    assert (grant.bucket_id, grant.service_account_id, grant.role) == (
        bucket.id,
        account.id,
        BUCKET_OBJECT_ROLE,
    )
    assert grant.created and grant.group_id and grant.membership_id and grant.permit_id
    again = cloud.grant_bucket_access(project, bucket.id, account.id, "npa-fleet-storage-access")
    assert again.model_copy(update={"created": True}) == grant and not again.created  # idempotent
    cloud.probe_bucket(bucket, key)

    cloud.delete_bucket(bucket.id)
    assert cloud.find_bucket(project, "fleet1-artifacts") is None


@covers(
    "find_service_account",
    "create_service_account",
    "create_access_key",
    "delete_access_key",
    "delete_service_account",
)
def test_service_account_and_key_lifecycle(backend: Backend) -> None:
    cloud = backend.cloud
    project = "project-e00existing"
    assert cloud.find_service_account(project, "npa-fleet-storage") is None

    account = cloud.create_service_account(project, "npa-fleet-storage", labels={"npa:fleet": "fleet1"})
    assert account.id.startswith("serviceaccount-")
    assert (account.project_id, account.name) == (project, "npa-fleet-storage")
    assert cloud.find_service_account(project, "npa-fleet-storage") == account

    created = cloud.create_access_key(project, account.id)
    assert isinstance(created.secret, SecretStr)
    secret = created.secret.get_secret_value()
    assert len(secret) >= 16
    assert secret not in repr(created) and secret not in str(created)
    assert created.key.service_account_id == account.id
    assert created.key.project_id == project
    assert created.key.aws_access_key_id and created.key.state == "ACTIVE"

    cloud.delete_access_key(created.key.id)
    cloud.delete_service_account(account.id)
    assert cloud.find_service_account(project, "npa-fleet-storage") is None


@covers(
    "list_buckets",
    "count_bucket_objects",
    "list_service_accounts",
    "list_access_keys",
    "delete_project",
)
def test_teardown_inventory_and_project_deletion(backend: Backend) -> None:
    """What a guarded teardown reads before deleting: a project's buckets (and whether they hold
    anything), its service accounts and their keys; and an empty project is deleted, a non-empty one not."""
    cloud = backend.cloud
    project = cloud.create_project(backend.tenant_id, "td-disposable", REGION, labels={"npa-fleet": "f"})
    assert cloud.list_buckets(project.id) == [] and cloud.list_service_accounts(project.id) == []

    bucket = cloud.create_bucket(project.id, "td-disposable-bucket", "standard", GIB)
    assert [b.id for b in cloud.list_buckets(project.id)] == [bucket.id]
    assert cloud.count_bucket_objects(bucket.id) == 0
    backend.put_object(bucket.id, bucket.name, "ckpt/1")
    assert cloud.count_bucket_objects(bucket.id) == 1

    account = cloud.create_service_account(project.id, "npa-fleet-storage", labels={"npa-fleet": "f"})
    first = cloud.create_access_key(project.id, account.id)
    second = cloud.create_access_key(project.id, account.id)
    assert [a.id for a in cloud.list_service_accounts(project.id)] == [account.id]
    assert cloud.list_service_accounts(project.id)[0].labels.get("npa-fleet") == "f"
    keys = cloud.list_access_keys(project.id, account.id)
    assert {k.id for k in keys} == {first.key.id, second.key.id}
    assert all(k.service_account_id == account.id for k in keys)

    with pytest.raises(CloudError):  # not empty: refused
        cloud.delete_project(project.id)
    cloud.delete_service_account(account.id)
    cloud.delete_bucket(bucket.id)
    assert cloud.list_buckets(project.id) == []
    cloud.delete_project(project.id)
    with pytest.raises(NotFound):
        cloud.get_project(project.id)


@covers("list_networks", "list_subnets", "delete_subnet", "delete_network", "delete_project")
def test_a_created_projects_default_network_is_deleted_with_it(backend: Backend) -> None:
    """The project phase through the adapter: the topology the cloud makes with a project (one
    `default-network`, one `default-subnet-*` in it) is recognised and deleted before the project; a network
    someone else added is inventoried as foreign and refuses the project."""
    from npa_pulumi.engine.teardown.phases import (
        TeardownRefused,
        default_topology,
        delete_project,
        inventory_except,
    )

    cloud = backend.cloud
    project = cloud.create_project(backend.tenant_id, "td-defaults", REGION, labels={"npa-fleet": "f"})
    pid = project.id
    # what Nebius makes along with the project (made here by hand where the backend does not)
    network = next((n for n in cloud.list_networks(pid) if n.name == "default-network"), None)
    network = network or cloud.create_network(pid, "default-network")
    subnets = [s for s in cloud.list_subnets(pid) if s.network_id == network.id]
    subnet = subnets[0] if subnets else cloud.create_subnet(pid, network.id, "default-subnet-td")
    topology = default_topology(cloud, pid, set())
    assert topology == {"default_network_id": network.id, "default_subnet_id": subnet.id}

    added = cloud.create_network(pid, "someone-elses-net")
    assert default_topology(cloud, pid, set()) == topology
    foreign = inventory_except(cloud, pid, set(topology.values()))
    assert foreign == [f"network {added.id} (someone-elses-net)"]
    with pytest.raises(TeardownRefused, match=added.id):
        delete_project(cloud, pid, foreign, topology, topology)
    assert cloud.get_project(pid).id == pid  # refused before any delete

    cloud.delete_network(added.id)
    left = inventory_except(cloud, pid, set(topology.values()))
    with pytest.raises(TeardownRefused, match="changed since it was planned"):
        delete_project(cloud, pid, left, topology, {})  # planned without it: not deleted now
    delete_project(cloud, pid, left, topology, topology)
    with pytest.raises(NotFound):
        cloud.get_project(pid)


@covers(
    "list_instances",
    "list_disks",
    "list_registries",
    "list_groups",
    "delete_group",
    "list_security_groups",
    "delete_security_group",
    "grant_bucket_access",
)
def test_a_projects_whole_inventory_names_what_holds_it(backend: Backend) -> None:
    """Every kind a user can put into a project is listed through the port (VMs, disks, container
    registries, IAM groups, security groups), and the teardown's inventory names each by kind, id and
    name; a bucket grant's group carries its account's labels (whoever owns the account owns it)."""
    from npa_pulumi.engine.teardown.phases import fleet_groups, inventory_except

    cloud = backend.cloud
    pid = cloud.create_project(backend.tenant_id, "td-holdings", REGION, labels={"npa-fleet": "f"}).id
    network = cloud.create_network(pid, "users-net")
    assert (cloud.list_instances(pid), cloud.list_disks(pid), cloud.list_registries(pid)) == ([], [], [])
    held = backend.seed_holdings(pid, network.id)

    [vm] = cloud.list_instances(pid)
    assert (vm.id, vm.project_id, vm.name, vm.state) == (held.instance_id, pid, "users-vm", "RUNNING")
    [disk] = cloud.list_disks(pid)
    assert (disk.id, disk.name, disk.size_bytes) == (held.disk_id, "users-disk", 64 * GIB)
    [registry] = cloud.list_registries(pid)
    assert (registry.id, registry.name, registry.state) == (held.registry_id, "users-registry", "ACTIVE")
    [group] = cloud.list_groups(pid)
    assert (group.id, group.project_id, group.name) == (held.group_id, pid, "users-group")
    [users_sg] = cloud.list_security_groups(pid)
    assert (users_sg.id, users_sg.network_id, users_sg.default) == (held.security_group_id, network.id, False)

    foreign = inventory_except(cloud, pid, {network.id})
    assert sorted(foreign) == sorted(
        [
            f"security group {held.security_group_id} (users-sg)",
            f"instance {held.instance_id} (users-vm)",
            f"disk {held.disk_id} (users-disk)",
            f"registry {held.registry_id} (users-registry)",
            f"iam group {held.group_id} (users-group)",
        ]
    )
    assert fleet_groups(cloud, pid, "f") == []  # a user's group never counts as the fleet's

    # the fleet's grant: its group carries the account's labels
    labels = {"npa-fleet": "f", "managed-by": "npa-pulumi"}
    bucket = cloud.create_bucket(pid, "td-holdings-bucket", "standard", GIB)
    account = cloud.create_service_account(pid, "npa-fleet-storage", labels=labels)
    grant = cloud.grant_bucket_access(pid, bucket.id, account.id, "npa-fleet-storage-access")
    assert fleet_groups(cloud, pid, "f") == [grant.group_id]
    assert {g.id: g.labels for g in cloud.list_groups(pid)}[grant.group_id] == labels

    cloud.delete_group(grant.group_id)
    cloud.delete_group(held.group_id)
    assert cloud.list_groups(pid) == []
    cloud.delete_security_group(held.security_group_id)
    assert cloud.list_security_groups(pid) == []
    cloud.delete_network(network.id)  # no security group of someone's left in it


@covers("list_security_groups", "delete_security_group", "delete_network", "delete_project")
def test_the_default_security_group_goes_with_the_default_network(backend: Backend) -> None:
    """A project as Nebius makes it (default network, default subnet, the network's provider-marked default
    security group) is that topology and nothing else: deleted with the project; the default group cannot
    be deleted on its own; a security group someone added to the default network makes it mixed."""
    from npa_pulumi.cloud.errors import FailedPrecondition
    from npa_pulumi.engine.teardown.phases import default_topology, delete_project, inventory_except

    cloud = backend.cloud
    pid = backend.project_with_defaults("td-default-sg", {"npa-fleet": "f"})
    [network] = cloud.list_networks(pid)
    [subnet] = cloud.list_subnets(pid)
    [group] = cloud.list_security_groups(pid)
    assert (group.network_id, group.default) == (network.id, True)
    assert group.name.startswith("default-security-group-")
    topology = default_topology(cloud, pid, set())
    assert topology == {
        "default_network_id": network.id,
        "default_subnet_id": subnet.id,
        "default_security_group_id": group.id,
    }
    assert inventory_except(cloud, pid, set(topology.values())) == []
    with pytest.raises(FailedPrecondition):  # it goes with its network
        cloud.delete_security_group(group.id)

    network_id = network.id
    extra = backend.seed_holdings(pid, network_id).security_group_id
    assert default_topology(cloud, pid, set()) == {}  # mixed: all of it is someone else's
    left = inventory_except(cloud, pid, set())
    assert f"security group {extra} (users-sg)" in left
    assert not any(group.id in item for item in left)  # the default group is named with its network
    cloud.delete_security_group(extra)
    for kind in ("instance", "disk", "registry", "iam group"):
        assert any(item.startswith(kind) for item in inventory_except(cloud, pid, set()))

    # the user's other holdings removed by hand (the simulator's own operations, or the fake's tables)
    _remove_holdings(backend, pid)
    delete_project(cloud, pid, inventory_except(cloud, pid, set(topology.values())), topology, topology)
    with pytest.raises(NotFound):
        cloud.get_project(pid)


def _remove_holdings(backend: Backend, project_id: str) -> None:
    cloud = backend.cloud
    for group in cloud.list_groups(project_id):
        cloud.delete_group(group.id)
    inner = cloud.inner
    if backend.kind == "local":
        simulator = inner.simulator
        for vm in cloud.list_instances(project_id):
            simulator.delete_instance(vm.id)
        for disk in cloud.list_disks(project_id):
            simulator.delete_disk(disk.id)
        for registry in cloud.list_registries(project_id):
            simulator.delete_registry(registry.id)
        return
    fake = backend.world.fake  # type: ignore[attr-defined]
    with fake.lock:
        for table in (fake.instances, fake.disks, fake.registries):
            for key in [k for k, m in table.items() if m.metadata.parent_id == project_id]:
                del table[key]


@covers(
    "list_clusters",
    "get_cluster",
    "list_node_groups",
    "list_project_node_groups",
    "get_node_group",
    "list_filesystems",
    "list_gpu_clusters",
    "delete_node_group",
    "delete_cluster",
)
def test_cluster_and_node_group_status(backend: Backend) -> None:
    cloud = backend.cloud
    project = "project-e00existing"
    seeded = backend.seed_cluster(project)

    cluster = cloud.get_cluster(seeded.cluster_id)
    assert [c.id for c in cloud.list_clusters(project)] == [cluster.id]
    assert (cluster.project_id, cluster.name, cluster.state) == (project, "train-a", "RUNNING")
    assert cluster.endpoint and cluster.k8s_version.startswith("1.31")

    groups = {g.id: g for g in cloud.list_node_groups(cluster.id)}
    assert set(groups) == {seeded.running_group, seeded.starved_group}
    running = cloud.get_node_group(seeded.running_group)
    assert running == groups[seeded.running_group]
    assert (running.state, running.target_node_count, running.ready_node_count) == ("RUNNING", 2, 2)
    assert running.cluster_id == cluster.id
    batched = cloud.list_project_node_groups(project, [cluster.id])  # the fleet-wide read
    assert {g.id: g for g in batched} == groups

    # The real failure mode: a quota-starved group is accepted and stays PROVISIONING, with the reason
    # visible only in its own events.
    starved = cloud.get_node_group(seeded.starved_group)
    assert (starved.state, starved.target_node_count, starved.ready_node_count) == ("PROVISIONING", 4, 0)
    assert starved.platform == "gpu-h100-sxm"
    failure = next(c for c in starved.conditions if c.kind == "QuotaFailure")
    assert failure.quota.startswith("compute.instance.gpu")
    assert failure.limit == 0

    assert [f.id for f in cloud.list_filesystems(project)] == [seeded.filesystem_id]
    assert cloud.list_filesystems(project)[0].size_bytes == 100 * GIB
    gpu_clusters = cloud.list_gpu_clusters(project)
    assert [(g.id, g.fabric) for g in gpu_clusters] == [(seeded.gpu_cluster_id, "fabric-3")]

    cloud.delete_node_group(seeded.starved_group)
    assert [g.id for g in cloud.list_node_groups(cluster.id)] == [seeded.running_group]
    cloud.delete_cluster(cluster.id)
    with pytest.raises(CloudError) as err:
        cloud.get_cluster(cluster.id)
    assert isinstance(err.value, NotFound)


@covers("kubernetes_api_available", "cluster_access")
def test_cluster_access(backend: Backend) -> None:
    """How a kubeconfig reaches a cluster's API: Nebius through the CLI's exec plugin (never a stored
    token); the local cloud through its own API server, which a run without API servers refuses clearly."""
    from npa_pulumi.cloud.errors import FailedPrecondition
    from npa_pulumi.kube.kubeconfig import ExecCredential

    cloud = backend.cloud
    seeded = backend.seed_cluster("project-e00existing")
    cluster = cloud.get_cluster(seeded.cluster_id)
    if backend.kind == "nebius":
        assert cloud.kubernetes_api_available() is True
        access = cloud.cluster_access(cluster.id)
        assert access.server == cluster.endpoint and "BEGIN CERTIFICATE" in access.ca_pem
        assert isinstance(access.credential, ExecCredential) and access.credential.command == "nebius"
        assert "get-token" in access.credential.args
        return
    assert cloud.kubernetes_api_available() is False  # the test suite runs the local cloud without them
    with pytest.raises(FailedPrecondition) as err:
        cloud.cluster_access(cluster.id)
    assert "kubernetes_api" in str(err.value)
