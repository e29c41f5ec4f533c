"""The local cloud's behaviour, in one process: IDs, typed errors, quota accounting, node groups that wait
for quota, capacity blocks, provisioning time, idempotency, fault injection, the inventory."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from npa_pulumi.cloud.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OperationTimeout,
    PermissionDenied,
    QuotaExceeded,
    Unavailable,
)
from npa_pulumi.cloud.port import AccessKeySecret
from npa_pulumi.simulator import LocalCloud, LocalSimulator, ids

TIGHT = Path(__file__).resolve().parents[2] / "fixtures" / "local_cloud" / "tight-tenant.yaml"
TENANT = "tenant-local"
GIB = 2**30


@pytest.fixture
def sim(tmp_path: Path) -> LocalSimulator:
    simulator = LocalSimulator(tmp_path / "cloud")
    assert simulator.initialise(TIGHT)["status"] == "initialised"
    return simulator


@pytest.fixture
def cloud(sim: LocalSimulator) -> LocalCloud:
    return LocalCloud(sim.directory)


def _usage(sim: LocalSimulator, name: str, region: str = "us-central1", scope: str = "tenant") -> int | None:
    found = [
        q
        for q in sim.list_quota_allowances(TENANT)
        if (q["name"], q["region"], q["scope"]) == (name, region, scope)
    ]
    assert len(found) == 1, found
    usage: int | None = found[0]["usage"]
    return usage


def _block_usage(sim: LocalSimulator, block_id: str) -> int | None:
    usage: int | None = sim.get_capacity_block_group(block_id)["usage"]
    return usage


def _subnet(sim: LocalSimulator, project_id: str = "project-existing1") -> str:
    subnet_id: str = sim.list_subnets(project_id)[0]["id"]
    return subnet_id


# ------------------------------------------------------------------ seeding


def test_first_use_seeds_the_default_fixture_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cloud = LocalCloud(tmp_path / "fresh")
    assert [p.id for p in cloud.list_projects(TENANT)] == ["project-existing1"]
    assert "initialised" in capsys.readouterr().err
    cloud.list_projects(TENANT)
    assert capsys.readouterr().err == ""  # only once


def test_without_auto_init_an_empty_directory_is_an_error(tmp_path: Path) -> None:
    from npa_pulumi.simulator.simulator import LocalCloudUnusable

    with pytest.raises(LocalCloudUnusable, match="local-cloud init"):
        LocalSimulator(tmp_path / "none", auto_init=False).list_projects(TENANT)


def test_initialise_is_idempotent_and_detects_another_fixture(sim: LocalSimulator) -> None:
    assert sim.initialise(TIGHT)["status"] == "unchanged"
    assert sim.initialise()["status"] == "conflict"  # the default fixture differs
    sim.create_project(TENANT, "p", "us-central1")
    assert sim.initialise(TIGHT, force=True)["status"] == "initialised"
    assert [p["name"] for p in sim.list_projects(TENANT)] == ["existing"]


def test_reset_empties_the_cloud_and_the_next_use_reseeds_the_default(sim: LocalSimulator) -> None:
    sim.create_project(TENANT, "p", "us-central1")
    sim.reset()
    assert not sim.is_initialised()
    names = {q["name"] for q in sim.list_quota_allowances(TENANT)}
    assert "compute.instance.gpu.rtx6000" in names  # the default fixture's, not the tight one's
    assert [p["name"] for p in sim.list_projects(TENANT)] == ["existing"]


def test_database_is_private_and_in_wal_mode(sim: LocalSimulator) -> None:
    import sqlite3

    assert sim.path.stat().st_mode & 0o077 == 0
    with sqlite3.connect(sim.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# ------------------------------------------------------------------ projects and typed errors


def test_projects_get_nebius_ids_and_duplicate_names_are_refused(cloud: LocalCloud) -> None:
    project = cloud.create_project(TENANT, "team-a", "us-central1")
    assert project.id.startswith("project-e00") and len(project.id) == len("project-e00") + 15
    assert cloud.get_project(project.id) == project
    with pytest.raises(AlreadyExists) as caught:
        cloud.create_project(TENANT, "team-a", "us-central1")
    assert caught.value.request is not None
    assert caught.value.request.method == "create_project"
    assert caught.value.request.params["name"] == "team-a"


def test_not_found_permission_denied_and_invalid_argument(cloud: LocalCloud) -> None:
    with pytest.raises(NotFound, match="project-e00nothere"):
        cloud.get_project("project-e00nothere")
    with pytest.raises(PermissionDenied):
        cloud.get_project("project-foreign1")
    with pytest.raises(PermissionDenied):
        cloud.list_projects("tenant-other")
    with pytest.raises(PermissionDenied):
        cloud.create_network("project-foreign1", "net")
    with pytest.raises(PermissionDenied):
        cloud.list_quota_allowances("tenant-other")
    with pytest.raises(InvalidArgument, match="mars-1"):
        cloud.create_project(TENANT, "p", "mars-1")
    assert "project-foreign1" not in [p.id for p in cloud.list_projects(TENANT)]


def test_project_count_quota(sim: LocalSimulator) -> None:
    for index in range(3):
        sim.create_project(TENANT, f"p{index}", "us-central1")
    with pytest.raises(
        QuotaExceeded, match=r"iam.project.count \[us-central1\]: limit 3, usage 3, requested 1"
    ):
        sim.create_project(TENANT, "p3", "us-central1")
    assert _usage(sim, "iam.project.count") == 3
    sim.create_project(TENANT, "elsewhere", "eu-north1")  # no limit there


# ------------------------------------------------------------------ VPC


def test_networks_charge_vpc_quota_and_release_it(sim: LocalSimulator) -> None:
    first = sim.create_network("project-existing1", "n1")
    sim.create_network("project-existing1", "n2")
    with pytest.raises(QuotaExceeded, match=re.escape("vpc.network.count")):
        sim.create_network("project-existing1", "n3")
    assert _usage(sim, "vpc.network.count") == 2
    sim.delete_network(first["id"])
    assert _usage(sim, "vpc.network.count") == 1
    sim.create_network("project-existing1", "n3")


def test_deletes_complete_asynchronously_under_a_delete_lag(sim: LocalSimulator, cloud: LocalCloud) -> None:
    """`delete_lag_seconds`: a deleted object stays visible as DELETING (still a child of its parent,
    still holding its name) until the lag passes, then it is NotFound, as on a real control plane."""
    from npa_pulumi.cloud.absence import NotYetGone, delete_network, delete_subnet, found, wait_gone

    project = sim.create_project(TENANT, "lagging", "us-central1")
    network = sim.create_network(project["id"], "n")
    subnet = sim.create_subnet(project["id"], network["id"], "s", cidr="10.9.0.0/24")
    sim.set_setting("delete_lag_seconds", 0.6)
    sim.delete_subnet(subnet["id"])
    assert sim.get_subnet(subnet["id"])["state"] == "DELETING"
    assert [s["state"] for s in sim.list_subnets(project["id"])] == ["DELETING"]
    with pytest.raises(FailedPrecondition, match="still has subnets"):
        sim.delete_network(network["id"])  # the subnet is not gone yet
    with pytest.raises(NotYetGone, match=subnet["id"]):
        wait_gone(found(lambda: sim.get_subnet(subnet["id"])), f"subnet {subnet['id']}", timeout_s=0.1)
    wait_gone(found(lambda: sim.get_subnet(subnet["id"])), "the subnet", timeout_s=10)
    assert sim.list_subnets(project["id"]) == []
    assert all(s["id"] != subnet["id"] for s in sim.inventory()["subnets"])
    # delete_network waits for its own absence: the project is empty when it returns
    delete_network(cloud, network["id"])
    with pytest.raises(NotFound):
        sim.get_network(network["id"])
    delete_subnet(cloud, subnet["id"])  # already gone counts as deleted
    sim.delete_project(project["id"])
    assert sim.get_project(project["id"])["state"] == "DELETING"
    time.sleep(0.7)
    with pytest.raises(NotFound):
        sim.get_project(project["id"])
    with pytest.raises(ValueError, match="delete_lag_seconds"):
        sim.set_setting("delete_lag_seconds", -1)


def test_a_new_project_gets_the_default_network_when_the_cloud_makes_one(sim: LocalSimulator) -> None:
    bare = sim.create_project(TENANT, "bare", "us-central1")
    assert sim.list_networks(bare["id"]) == [] and sim.list_subnets(bare["id"]) == []
    with pytest.raises(ValueError, match="project_default_network"):
        sim.set_setting("project_default_network", 2)
    sim.set_setting("project_default_network", 1)
    project = sim.create_project(TENANT, "p", "us-central1", labels={"npa-fleet": "f"})
    networks, subnets = sim.list_networks(project["id"]), sim.list_subnets(project["id"])
    assert [n["name"] for n in networks] == ["default-network"]
    assert len(subnets) == 1 and subnets[0]["name"].startswith("default-subnet-")
    assert subnets[0]["network_id"] == networks[0]["id"]
    assert networks[0]["labels"] == {} and subnets[0]["labels"] == {}  # the cloud's, not the caller's
    assert _usage(sim, "vpc.network.count") == 1
    # a project that holds it is not empty: the topology is deleted first, as on Nebius
    with pytest.raises(FailedPrecondition, match="not empty"):
        sim.delete_project(project["id"])
    sim.delete_subnet(subnets[0]["id"])
    sim.delete_network(networks[0]["id"])
    sim.delete_project(project["id"])


def test_a_network_with_subnets_cannot_be_deleted(sim: LocalSimulator) -> None:
    project = sim.create_project(TENANT, "p", "us-central1")
    network = sim.create_network(project["id"], "net")
    subnet = sim.create_subnet(project["id"], network["id"], "sub")
    assert subnet["id"].startswith("vpcsubnet-e00") and subnet["network_id"] == network["id"]
    with pytest.raises(FailedPrecondition, match="still has subnets"):
        sim.delete_network(network["id"])
    sim.delete_subnet(subnet["id"])
    sim.delete_network(network["id"])
    with pytest.raises(NotFound):
        sim.get_network(network["id"])


def test_project_scoped_quota_binds_only_its_project(sim: LocalSimulator) -> None:
    existing = sim.list_networks("project-existing1")[0]["id"]
    sim.create_subnet("project-existing1", existing, "second")
    with pytest.raises(QuotaExceeded, match=re.escape("vpc.subnet.count")):
        sim.create_subnet("project-existing1", existing, "third")
    other = sim.create_project(TENANT, "other", "us-central1")
    network = sim.create_network(other["id"], "net")
    sim.create_subnet(other["id"], network["id"], "a")
    sim.create_subnet(other["id"], network["id"], "b")  # the project-scoped record does not apply here
    assert _usage(sim, "vpc.subnet.count", scope="project") == 1


def test_list_quota_allowances_returns_every_record_with_its_scope(sim: LocalSimulator) -> None:
    records = sim.list_quota_allowances(TENANT)
    scopes = {(q["name"], q["region"]): (q["scope"], q["parent_id"]) for q in records}
    assert scopes[("vpc.subnet.count", "us-central1")] == ("project", "project-existing1")
    assert scopes[("compute.disk.count", "us-central1")] == ("unscoped", "")
    assert scopes[("mk8s.cluster.count", "us-central1")] == ("tenant", TENANT)
    unlimited = next(q for q in records if q["name"] == "vpc.route.count")
    assert unlimited["limit"] is None
    pct_only = next(
        q for q in records if q["name"] == "compute.instance.gpu.h200" and q["region"] == "eu-north1"
    )
    assert pct_only["usage"] is None and pct_only["usage_percentage"] == 0.5
    assert pct_only["usage_state"] == "USED"


# ------------------------------------------------------------------ buckets, service accounts, keys


def test_buckets_charge_count_and_size_and_names_are_global(sim: LocalSimulator) -> None:
    other = sim.create_project(TENANT, "other", "us-central1")
    bucket = sim.create_bucket("project-existing1", "shared-data", "STANDARD", 50 * GIB)
    assert bucket["id"].startswith("bucket-e00") and bucket["storage_class"] == "standard"
    assert _usage(sim, "storage.bucket.count") == 1
    assert _usage(sim, "storage.bucket.size.standard") == 50 * GIB
    with pytest.raises(AlreadyExists):
        sim.create_bucket(other["id"], "shared-data", "standard", GIB)
    with pytest.raises(QuotaExceeded, match=re.escape("storage.bucket.count")):
        sim.create_bucket(other["id"], "more-data", "standard", GIB)
    with pytest.raises(InvalidArgument, match="storage class"):
        sim.create_bucket(other["id"], "x-data", "glacier", GIB)
    assert sim.find_bucket("project-existing1", "shared-data") == bucket
    assert sim.find_bucket(other["id"], "shared-data") is None
    sim.delete_bucket(bucket["id"])
    assert _usage(sim, "storage.bucket.count") == 0
    assert _usage(sim, "storage.bucket.size.standard") == 0


def test_probe_bucket_verifies_the_access_key(cloud: LocalCloud) -> None:
    bucket = cloud.create_bucket("project-existing1", "probe-me", "standard", GIB)
    account = cloud.create_service_account("project-existing1", "writer")
    assert cloud.find_service_account("project-existing1", "writer") == account
    credentials = cloud.create_access_key("project-existing1", account.id)
    with pytest.raises(PermissionDenied, match=r"AccessDenied: service account .* holds no access permit"):
        cloud.probe_bucket(bucket, credentials)  # a valid key, but no grant on the bucket
    grant = cloud.grant_bucket_access("project-existing1", bucket.id, account.id, "storage-access")
    assert grant.created and grant.role == "storage.object-editor" and grant.bucket_id == bucket.id
    assert not cloud.grant_bucket_access("project-existing1", bucket.id, account.id, "storage-access").created
    cloud.probe_bucket(bucket, credentials)
    wrong = AccessKeySecret(key=credentials.key, secret=SecretStr("not-the-secret"))
    with pytest.raises(PermissionDenied, match="SignatureDoesNotMatch"):
        cloud.probe_bucket(bucket, wrong)
    other = cloud.create_project(TENANT, "other", "us-central1")
    stranger = cloud.create_service_account(other.id, "writer")
    foreign_key = cloud.create_access_key(other.id, stranger.id)
    with pytest.raises(PermissionDenied, match="AccessDenied"):
        cloud.probe_bucket(bucket, foreign_key)
    cloud.delete_service_account(account.id)  # its keys go with it
    with pytest.raises(PermissionDenied, match="InvalidAccessKeyId"):
        cloud.probe_bucket(bucket, credentials)


def test_a_temporary_access_key_expires_and_is_refused_from_then_on(cloud: LocalCloud) -> None:
    bucket = cloud.create_bucket("project-existing1", "short-lived", "standard", GIB)
    account = cloud.create_service_account("project-existing1", "ci")
    cloud.grant_bucket_access("project-existing1", bucket.id, account.id, "storage-access")
    # Load only delays what follows a creation: a key an hour from its expiry is usable at any load, and
    # one half a second from it has expired once half a second has passed.
    lasting = cloud.create_access_key(
        "project-existing1", account.id, expires_at=datetime.now(UTC) + timedelta(hours=1)
    )
    assert lasting.key.state == "ACTIVE"
    cloud.probe_bucket(bucket, lasting)  # usable until it expires
    expires = datetime.now(UTC) + timedelta(seconds=0.5)
    credentials = cloud.create_access_key("project-existing1", account.id, expires_at=expires)
    assert credentials.key.expires_at is not None
    assert abs((credentials.key.expires_at - expires).total_seconds()) < 0.01  # stored as given
    time.sleep(0.6)
    listed = {key.id: key for key in cloud.list_access_keys("project-existing1", account.id)}
    expired = listed[credentials.key.id]
    assert expired.state == "EXPIRED" and expired.expires_at == credentials.key.expires_at
    assert listed[lasting.key.id].state == "ACTIVE"
    with pytest.raises(PermissionDenied, match=r"InvalidAccessKeyId: .* has expired"):
        cloud.probe_bucket(bucket, credentials)
    forever = cloud.create_access_key("project-existing1", account.id)
    assert forever.key.expires_at is None and forever.key.state == "ACTIVE"


def test_the_inventory_never_shows_access_key_secrets(sim: LocalSimulator) -> None:
    account = sim.create_service_account("project-existing1", "sa")
    created = sim.create_access_key("project-existing1", account["id"])
    inventory = sim.inventory()
    assert list(inventory) == [
        "projects", "networks", "subnets", "mk8s_clusters", "node_groups", "filesystems", "gpu_clusters",
        "buckets", "service_accounts", "access_keys", "instances", "disks", "registries", "iam_groups",
        "security_groups", "quotas", "capacity_block_groups",
    ]  # fmt: skip
    assert all(isinstance(v, list) for v in inventory.values())
    text = repr(inventory)
    assert created["secret"] not in text and "secret" not in text
    assert inventory["access_keys"][0]["aws_access_key_id"] == created["key"]["aws_access_key_id"]


# ------------------------------------------------------------------ mk8s clusters and node groups


def test_cluster_and_node_groups_consume_quota_and_release_it_on_delete(sim: LocalSimulator) -> None:
    cluster = sim.create_cluster("project-existing1", "c1", _subnet(sim))
    assert cluster["id"].startswith("mk8scluster-e00") and cluster["state"] == "RUNNING"
    cpu = sim.create_node_group(cluster["id"], "cpu", 2, "cpu-d3", "16vcpu-64gb", disk_size_gib=100)
    gpu = sim.create_node_group(
        cluster["id"], "gpu", 1, "gpu-h200-sxm", "8gpu-128vcpu-1600gb", disk_size_gib=1023
    )
    assert cpu["state"] == gpu["state"] == "RUNNING"
    assert cpu["ready_node_count"] == 2
    assert _usage(sim, "mk8s.cluster.count") == 1
    assert _usage(sim, "compute.instance.count") == 3
    assert _usage(sim, "compute.instance.non-gpu.vcpu") == 32
    assert _usage(sim, "compute.instance.gpu.h200") == 8
    assert _usage(sim, "compute.disk.count", scope="unscoped") == 3
    sim.delete_node_group(gpu["id"])
    assert _usage(sim, "compute.instance.gpu.h200") == 0
    sim.delete_cluster(cluster["id"])  # takes the CPU group with it
    assert sim.inventory()["node_groups"] == []
    for name in ("mk8s.cluster.count", "compute.instance.count", "compute.instance.non-gpu.vcpu"):
        assert _usage(sim, name) == 0


def test_cluster_count_quota_refuses_the_cluster(sim: LocalSimulator) -> None:
    sim.create_cluster("project-existing1", "c1", _subnet(sim))
    sim.create_cluster("project-existing1", "c2", _subnet(sim))
    with pytest.raises(QuotaExceeded, match=re.escape("mk8s.cluster.count")):
        sim.create_cluster("project-existing1", "c3", _subnet(sim))


def test_cluster_checks_its_subnet_tenant_and_region(sim: LocalSimulator) -> None:
    other = sim.create_project(TENANT, "other", "us-central1")
    with pytest.raises(InvalidArgument, match="not in project"):
        sim.create_cluster(other["id"], "c", _subnet(sim))
    with pytest.raises(PermissionDenied):
        sim.create_cluster("project-existing1", "c", _subnet(sim), tenant_id="tenant-other")
    with pytest.raises(InvalidArgument, match="us-central1, not eu-north1"):
        sim.create_cluster("project-existing1", "c", _subnet(sim), region="eu-north1")
    cluster = sim.create_cluster("project-existing1", "c", _subnet(sim))
    with pytest.raises(FailedPrecondition, match="still used by"):
        sim.delete_subnet(_subnet(sim))
    assert cluster["subnet_id"] == _subnet(sim)


def test_a_node_group_over_quota_stays_provisioning_with_a_quota_failure(cloud: LocalCloud) -> None:
    cluster = cloud.create_cluster("project-existing1", "c1", cloud.list_subnets("project-existing1")[0].id)
    group = cloud.create_node_group(
        cluster.id, "gpu", 2, "gpu-h200-sxm", "8gpu-128vcpu-1600gb", disk_size_gib=1023
    )
    assert group.state == "PROVISIONING" and group.ready_node_count == 0
    (condition,) = group.conditions
    assert condition.kind == "QuotaFailure"
    assert condition.quota == "compute.instance.gpu.h200"
    assert (condition.limit, condition.requested) == (8, 16)
    # the group is accepted, and nothing of it is charged while it waits
    assert cloud.get_node_group(group.id).state == "PROVISIONING"
    assert [g.id for g in cloud.list_node_groups(cluster.id)] == [group.id]
    assert (
        cloud.simulator.inventory()["node_groups"][0]["conditions"][0]["quota"] == "compute.instance.gpu.h200"
    )
    assert _usage(cloud.simulator, "compute.instance.count") == 0


def test_a_waiting_node_group_starts_once_quota_frees_up(cloud: LocalCloud) -> None:
    subnet = cloud.list_subnets("project-existing1")[0].id
    cluster = cloud.create_cluster("project-existing1", "c1", subnet)
    first = cloud.create_node_group(
        cluster.id, "first", 1, "gpu-h200-sxm", "8gpu-128vcpu-1600gb", disk_size_gib=500
    )
    waiting = cloud.create_node_group(
        cluster.id, "waiting", 1, "gpu-h200-sxm", "8gpu-128vcpu-1600gb", disk_size_gib=500
    )
    assert first.state == "RUNNING" and waiting.state == "PROVISIONING"
    cloud.delete_node_group(first.id)
    started = cloud.get_node_group(waiting.id)
    assert started.state == "RUNNING" and started.conditions == ()
    assert _usage(cloud.simulator, "compute.instance.gpu.h200") == 8


def test_strict_reserved_groups_consume_the_capacity_block_not_gpu_quota(sim: LocalSimulator) -> None:
    cluster = sim.create_cluster("project-existing1", "c1", _subnet(sim))
    group = sim.create_node_group(
        cluster["id"], "rtx", 3, "gpu-rtx6000", "2gpu-32vcpu-128gb", disk_size_gib=200,
        reservation_policy="STRICT", reservation_ids=["capacityblockgroup-local1"],
    )  # fmt: skip
    assert group["state"] == "RUNNING"
    assert group["reservation_policy"] == "STRICT"
    assert group["reservation_ids"] == ["capacityblockgroup-local1"]
    assert _block_usage(sim, "capacityblockgroup-local1") == 2 + 6
    assert sim.get_capacity_block_group("capacityblockgroup-local1")["usage_state"] == "USED"
    names = {q["name"] for q in sim.list_quota_allowances(TENANT) if q["usage"]}
    assert not any(name.startswith("compute.instance.gpu.") for name in names)
    sim.delete_node_group(group["id"])
    assert _block_usage(sim, "capacityblockgroup-local1") == 2


def test_a_strict_group_beyond_its_block_waits_with_a_capacity_failure(sim: LocalSimulator) -> None:
    cluster = sim.create_cluster("project-existing1", "c1", _subnet(sim))
    group = sim.create_node_group(
        cluster["id"], "rtx", 4, "gpu-rtx6000", "2gpu-32vcpu-128gb",
        reservation_policy="STRICT", reservation_ids=["capacityblockgroup-local1"],
    )  # fmt: skip
    assert group["state"] == "PROVISIONING"
    (condition,) = group["conditions"]
    assert condition["kind"] == "CapacityBlockFailure"
    assert condition["quota"] == "capacityblockgroup-local1"
    assert (condition["limit"], condition["requested"]) == (8, 8)
    assert _block_usage(sim, "capacityblockgroup-local1") == 2


def test_a_block_reported_by_percentage_counts_its_baseline(sim: LocalSimulator) -> None:
    cluster = sim.create_cluster("project-existing1", "c1", _subnet(sim))
    block = sim.get_capacity_block_group("capacityblockgroup-pct")
    assert block["usage"] is None and block["usage_percentage"] == 0.5
    fits = sim.create_node_group(
        cluster["id"], "a", 2, "gpu-rtx6000", "2gpu-32vcpu-128gb",
        reservation_policy="STRICT", reservation_ids=["capacityblockgroup-pct"],
    )  # fmt: skip
    assert fits["state"] == "RUNNING"
    assert sim.get_capacity_block_group("capacityblockgroup-pct")["usage_percentage"] == 1.0


def test_reservations_are_checked_against_the_block(sim: LocalSimulator) -> None:
    cluster = sim.create_cluster("project-existing1", "c1", _subnet(sim))
    args = {"cluster_id": cluster["id"], "name": "g", "node_count": 1, "preset": "8gpu-128vcpu-1600gb"}
    with pytest.raises(FailedPrecondition, match="reserves gpu-rtx6000, not gpu-h200-sxm"):
        sim.create_node_group(platform="gpu-h200-sxm", reservation_policy="STRICT",
                              reservation_ids=["capacityblockgroup-local1"], **args)  # fmt: skip
    with pytest.raises(PermissionDenied):
        sim.create_node_group(platform="gpu-rtx6000", reservation_policy="STRICT",
                              reservation_ids=["capacityblockgroup-foreign"], **args)  # fmt: skip
    with pytest.raises(NotFound):
        sim.create_node_group(platform="gpu-rtx6000", reservation_policy="STRICT",
                              reservation_ids=["capacityblockgroup-nope"], **args)  # fmt: skip
    with pytest.raises(InvalidArgument, match="takes no reservation ids"):
        sim.create_node_group(platform="gpu-rtx6000", reservation_policy="FORBID",
                              reservation_ids=["capacityblockgroup-local1"], **args)  # fmt: skip
    assert "capacityblockgroup-foreign" not in [b["id"] for b in sim.list_capacity_block_groups(TENANT)]


def test_filesystems_and_gpu_clusters_cannot_go_while_node_groups_use_them(sim: LocalSimulator) -> None:
    cluster = sim.create_cluster("project-existing1", "c1", _subnet(sim))
    filesystem = sim.create_filesystem("project-existing1", "fs", 100 * GIB)
    assert filesystem["id"].startswith("computefilesystem-e00") and filesystem["state"] == "READY"
    with pytest.raises(QuotaExceeded, match=re.escape("compute.filesystem.count")):
        sim.create_filesystem("project-existing1", "fs2", GIB)
    gpu_cluster = sim.create_gpu_cluster("project-existing1", "ib", "fabric-1")
    assert gpu_cluster["id"].startswith("computegpucluster-e00")
    group = sim.create_node_group(
        cluster["id"], "g", 1, "cpu-d3", "4vcpu-16gb", gpu_cluster_id=gpu_cluster["id"],
        filesystems=[{"filesystem_id": filesystem["id"], "attach_mode": "READ_WRITE", "mount_tag": "data"}],
    )  # fmt: skip
    with pytest.raises(FailedPrecondition, match="attached to"):
        sim.delete_filesystem(filesystem["id"])
    with pytest.raises(FailedPrecondition, match="used by"):
        sim.delete_gpu_cluster(gpu_cluster["id"])
    sim.delete_node_group(group["id"])
    sim.delete_filesystem(filesystem["id"])
    sim.delete_gpu_cluster(gpu_cluster["id"])
    assert sim.list_filesystems("project-existing1") == [] == sim.list_gpu_clusters("project-existing1")


def test_simulated_provisioning_time(sim: LocalSimulator) -> None:
    sim.set_setting("provisioning_seconds", 0.4)
    cluster = sim.create_cluster("project-existing1", "slow", _subnet(sim))
    group = sim.create_node_group(cluster["id"], "g", 1, "cpu-d3", "4vcpu-16gb")
    assert cluster["state"] == "PROVISIONING" and group["state"] == "PROVISIONING"
    assert group["conditions"] == []  # waiting for time, not for quota
    time.sleep(0.5)
    assert sim.get_cluster(cluster["id"])["state"] == "RUNNING"
    assert sim.get_node_group(group["id"])["ready_node_count"] == 1


# ------------------------------------------------------------------ idempotency


def test_idempotency_keys_replay_and_derive_the_id(sim: LocalSimulator) -> None:
    first = sim.create_cluster("project-existing1", "c1", _subnet(sim), idempotency_key="key-1")
    assert first["id"] == ids.keyed_id("mk8scluster", "key-1")
    again = sim.create_cluster("project-existing1", "c1", _subnet(sim), idempotency_key="key-1")
    assert again["id"] == first["id"]
    assert len(sim.list_clusters("project-existing1")) == 1
    assert _usage(sim, "mk8s.cluster.count") == 1  # charged once
    with pytest.raises(AlreadyExists, match="different"):
        sim.create_cluster("project-existing1", "c2", _subnet(sim), idempotency_key="key-1")


# ------------------------------------------------------------------ the recipe's bounded wait


def test_provision_waits_and_removes_a_quota_starved_node_group(sim: LocalSimulator) -> None:
    cluster = sim.create_cluster("project-existing1", "c1", _subnet(sim))
    with pytest.raises(QuotaExceeded) as caught:
        sim.provision("node_group", 0.3, cluster_id=cluster["id"], name="gpu", node_count=2,
                      platform="gpu-h200-sxm", preset="8gpu-128vcpu-1600gb")  # fmt: skip
    message = str(caught.value)
    assert "stayed PROVISIONING for 0.3s" in message
    assert "QuotaFailure" in message and "compute.instance.gpu.h200" in message and "requested 16" in message
    assert sim.list_node_groups(cluster["id"]) == []  # rolled back
    ok = sim.provision("node_group", 1, cluster_id=cluster["id"], name="cpu", node_count=1,
                       platform="cpu-d3", preset="4vcpu-16gb")  # fmt: skip
    assert ok["state"] == "RUNNING"


def test_provision_times_out_on_slow_provisioning(
    sim: LocalSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim.set_setting("provisioning_seconds", 30)
    monkeypatch.setenv("NPA_LOCAL_CLOUD_WAIT_TIMEOUT_S", "0.2")
    assert sim.wait_timeout() == 0.2
    with pytest.raises(OperationTimeout, match="still PROVISIONING"):
        sim.provision("cluster", project_id="project-existing1", name="c1", subnet_id=_subnet(sim))
    assert sim.list_clusters("project-existing1") == []


# ------------------------------------------------------------------ fault injection


def test_injected_errors_hit_the_next_n_calls_then_stop(sim: LocalSimulator) -> None:
    sim.add_fault("create_project", "unavailable", count=2)
    for _ in range(2):
        with pytest.raises(Unavailable) as caught:
            sim.create_project(TENANT, "p", "us-central1")
        assert caught.value.retryable and caught.value.request is not None
    assert sim.list_faults() == []
    assert sim.create_project(TENANT, "p", "us-central1")["name"] == "p"
    assert _usage(sim, "iam.project.count") == 1  # the failed calls changed nothing


def test_latency_beyond_the_callers_timeout_is_an_operation_timeout(cloud: LocalCloud) -> None:
    cloud.simulator.add_fault("create_network", None, count=1, latency_ms=5000)
    with pytest.raises(OperationTimeout) as err:
        cloud.create_network("project-existing1", "late", timeout_s=0.1)
    # Gave up at the caller's timeout (the simulator answers so only without serving the latency).
    assert "did not finish within 0.1s" in str(err.value)
    assert [n.name for n in cloud.list_networks("project-existing1")] == ["default-network"]


def test_wildcard_and_persistent_faults(sim: LocalSimulator) -> None:
    sim.add_fault("*", "permission-denied", count=None, message="token revoked")
    for _ in range(3):
        with pytest.raises(PermissionDenied, match="token revoked"):
            sim.get_project("project-existing1")
    assert sim.list_faults()[0]["remaining"] is None
    assert sim.clear_faults() == 1
    assert sim.get_project("project-existing1")["id"] == "project-existing1"


def test_fault_arguments_are_validated(sim: LocalSimulator) -> None:
    with pytest.raises(ValueError, match="unknown operation"):
        sim.add_fault("create_projet", "unavailable")
    with pytest.raises(ValueError, match="unknown error kind"):
        sim.add_fault("create_project", "flaky")
    with pytest.raises(ValueError, match="needs an error kind, a latency"):
        sim.add_fault("create_project", None)


def test_resize_node_group_charges_the_new_size(sim: LocalSimulator) -> None:
    cluster = sim.create_cluster("project-existing1", "c1", _subnet(sim))
    cpu = sim.create_node_group(cluster["id"], "cpu", 2, "cpu-d3", "16vcpu-64gb", disk_size_gib=100)
    assert _usage(sim, "compute.instance.non-gpu.vcpu") == 32
    resized = sim.resize_node_group(cpu["id"], 1)
    assert resized["target_node_count"] == 1 and resized["id"] == cpu["id"]
    assert _usage(sim, "compute.instance.count") == 1
    assert _usage(sim, "compute.instance.non-gpu.vcpu") == 16
    with pytest.raises(InvalidArgument, match="non-negative"):
        sim.resize_node_group(cpu["id"], -1)
    with pytest.raises(NotFound):
        sim.resize_node_group("mk8snodegroup-e00000000000000000", 1)


def test_a_database_made_before_the_fleet_scale_indexes_gains_them(sim: LocalSimulator) -> None:
    """The indexes every operation's waiting-for-quota check and every write's purge read are added to a
    database made without them, and the queries use them (a 10,000-cluster fleet scanned every row)."""
    import sqlite3

    from npa_pulumi.simulator import db

    added = ("resources_waiting", "resources_deleting", "allocations_sums")
    conn = sqlite3.connect(db.db_path(sim.directory))
    for name in added:
        conn.execute(f"DROP INDEX {name}")
    conn.close()
    db._MIGRATED.clear()  # a new process
    project = sim.list_projects(TENANT)[0]  # any operation brings the database up to date
    conn = sqlite3.connect(db.db_path(sim.directory))
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert set(added) <= names
    plan = " ".join(
        str(row[3])
        for row in conn.execute(
            "EXPLAIN QUERY PLAN SELECT 1 FROM resources WHERE kind = 'node_group' AND ready_at < 0 LIMIT 1"
        )
    )
    conn.close()
    assert "resources_waiting" in plan
    assert project["id"]
