"""Wire-level behaviour of the `nebius` adapter that only a real client stack can show.

Every test drives the adapter built by `make_cloud("nebius", ...)` through the official SDK to the
loopback fake and then inspects what actually crossed the wire: metadata, request fields, how many
attempts, with which idempotency keys.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from pydantic import SecretStr
from wire.world import (
    FAST,
    OTHER_TENANT,
    OTHER_TOKEN,
    STALE_TOKEN,
    TENANT,
    TOKEN,
    WireWorld,
    wire_world,
)

from npa_pulumi.cloud.errors import (
    AlreadyExists,
    CloudError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OperationTimeout,
    PermissionDenied,
    QuotaExceeded,
    Unauthenticated,
    Unavailable,
)
from npa_pulumi.cloud.nebius import ProfileError
from npa_pulumi.cloud.port import AccessKeySecret, Bucket

pytestmark = pytest.mark.integration

PROJECT = "project-e00existing"
REGION = "eu-north1"
GIB = 1024**3


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WireWorld]:
    with wire_world(tmp_path, monkeypatch) as w:
        yield w


def retry(**overrides: object) -> dict[str, object]:
    return {**FAST["retry"], **overrides}  # type: ignore[dict-item]


def codes(world: WireWorld, method: str) -> list[str]:
    return [c.code for c in world.fake.calls_to(method)]


# ---------------------------------------------------------------------------- what real clients send


def test_requests_carry_token_parent_ids_masks_and_keys(world: WireWorld) -> None:
    cloud = world.cloud()
    project = cloud.create_project(TENANT, "fleet1-b", REGION)
    network = cloud.create_network(project.id, "net")
    cloud.create_subnet(project.id, network.id, "subnet")
    cloud.list_quota_allowances(TENANT)

    calls = world.fake.calls
    assert calls, "nothing reached the fake"
    assert {c.metadata.get("authorization") for c in calls} == {f"Bearer {TOKEN}"}
    assert all("npa-pulumi/" in c.metadata.get("user-agent", "") for c in calls)

    creates = [c for c in calls if c.method.endswith("/Create")]
    keys = [c.metadata.get("x-idempotency-key", "") for c in creates]
    assert len(creates) == 3 and all(keys) and len(set(keys)) == 3

    project_req = world.fake.calls_to("ProjectService/Create")[0].request
    assert (project_req.metadata.parent_id, project_req.metadata.name) == (TENANT, "fleet1-b")
    assert project_req.spec.region == REGION
    subnet_req = world.fake.calls_to("SubnetService/Create")[0].request
    assert (subnet_req.metadata.parent_id, subnet_req.spec.network_id) == (project.id, network.id)
    assert subnet_req.spec.ipv4_private_pools.use_network_pools is True

    pages = world.fake.calls_to("QuotaAllowanceService/List")
    assert [c.request.parent_id for c in pages] == [TENANT] * 4
    assert [c.request.page_token for c in pages] == ["", "page:2", "page:4", "page:6"]
    # No method the adapter calls is an Update, so no X-ResetMask is ever needed; make sure of it.
    assert not [c for c in calls if "/Update" in c.method]


def test_operations_are_polled_through_the_operation_service(world: WireWorld) -> None:
    world.fake.operation_polls = 3
    network = world.cloud().create_network(PROJECT, "net")
    assert network.state == "READY"
    polls = world.fake.calls_to("OperationService/Get")
    assert len(polls) == 3
    assert {c.request.id for c in polls} == {next(iter(world.fake.operations))}


def test_the_port_works_from_async_code(world: WireWorld) -> None:
    # Pulumi programs run on an asyncio loop; the SDK refuses synchronous waits there.
    cloud = world.cloud()

    async def inside_a_loop() -> list[str]:
        network = cloud.create_network(PROJECT, "from-async")
        return [n.id for n in cloud.list_networks(PROJECT)] + [network.id]

    ids = asyncio.run(inside_a_loop())
    assert ids[0] == ids[1] and ids[0].startswith("vpcnetwork-")


# ---------------------------------------------------------------------------- retries


def test_reads_retry_unavailable(world: WireWorld) -> None:
    world.fake.fail_next("ProjectService/List", grpc.StatusCode.UNAVAILABLE, times=2)
    assert [p.id for p in world.cloud().list_projects(TENANT)] == [PROJECT]
    assert codes(world, "ProjectService/List") == ["UNAVAILABLE", "UNAVAILABLE", "OK"]


def test_read_retries_are_bounded(world: WireWorld) -> None:
    world.fake.fail_next("ProjectService/Get", grpc.StatusCode.UNAVAILABLE, times=100)
    cloud = world.cloud(retry=retry(max_attempts=3))
    with pytest.raises(Unavailable) as err:
        cloud.get_project(PROJECT)
    assert err.value.retryable
    assert err.value.request is not None and err.value.request.params == {"id": PROJECT}
    assert codes(world, "ProjectService/Get") == ["UNAVAILABLE"] * 3


def test_a_page_that_fails_midway_is_retried_not_restarted(world: WireWorld) -> None:
    world.fake.fail_next("QuotaAllowanceService/List", grpc.StatusCode.UNAVAILABLE, skip=2)
    assert len(world.cloud().list_quota_allowances(TENANT)) == 7
    pages = world.fake.calls_to("QuotaAllowanceService/List")
    assert [(c.request.page_token, c.code) for c in pages] == [
        ("", "OK"),
        ("page:2", "OK"),
        ("page:4", "UNAVAILABLE"),
        ("page:4", "OK"),
        ("page:6", "OK"),
    ]


def test_operation_polls_retry_unavailable(world: WireWorld) -> None:
    world.fake.operation_polls = 2
    world.fake.fail_next("OperationService/Get", grpc.StatusCode.UNAVAILABLE, times=2)
    assert world.cloud().create_network(PROJECT, "net").state == "READY"
    assert codes(world, "OperationService/Get") == ["UNAVAILABLE", "UNAVAILABLE", "OK", "OK"]
    assert len(world.fake.calls_to("NetworkService/Create")) == 1


def test_unavailable_create_is_resent_with_the_same_idempotency_key(world: WireWorld) -> None:
    # The server applied the create but the answer was lost: only the key stops a duplicate.
    world.fake.fail_next("ProjectService/Create", grpc.StatusCode.UNAVAILABLE, after_effect=True)
    project = world.cloud().create_project(TENANT, "fleet1-c", REGION)

    attempts = world.fake.calls_to("ProjectService/Create")
    assert [c.code for c in attempts] == ["UNAVAILABLE", "OK"]
    assert attempts[0].metadata["x-idempotency-key"] == attempts[1].metadata["x-idempotency-key"]
    assert attempts[1].replayed
    assert [p.metadata.id for p in world.fake.projects.values() if p.metadata.name == "fleet1-c"] == [
        project.id
    ]


def test_mutations_are_never_retried_when_keys_are_not_honoured(world: WireWorld) -> None:
    world.fake.fail_next("ProjectService/Create", grpc.StatusCode.UNAVAILABLE)
    cloud = world.cloud(retry=retry(idempotent_mutations=False))
    with pytest.raises(Unavailable):
        cloud.create_project(TENANT, "fleet1-d", REGION)
    assert codes(world, "ProjectService/Create") == ["UNAVAILABLE"]
    assert not [p for p in world.fake.projects.values() if p.metadata.name == "fleet1-d"]


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (grpc.StatusCode.RESOURCE_EXHAUSTED, QuotaExceeded),
        (grpc.StatusCode.PERMISSION_DENIED, PermissionDenied),
        (grpc.StatusCode.FAILED_PRECONDITION, FailedPrecondition),
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgument),
        (grpc.StatusCode.NOT_FOUND, NotFound),
        (grpc.StatusCode.ALREADY_EXISTS, AlreadyExists),
        (grpc.StatusCode.UNAUTHENTICATED, Unauthenticated),
    ],
)
def test_failed_mutations_surface_typed_errors_without_retry(
    world: WireWorld, code: grpc.StatusCode, error: type[CloudError]
) -> None:
    world.fake.fail_next("NetworkService/Create", code, message="refused by the fake")
    with pytest.raises(error) as err:
        world.cloud().create_network(PROJECT, "net")
    assert type(err.value) is error
    assert "refused by the fake" in str(err.value)
    assert err.value.request is not None
    assert err.value.request.method == "vpc.v1.NetworkService.Create"
    assert err.value.request.params["parent_id"] == PROJECT
    assert codes(world, "NetworkService/Create") == [code.name]
    assert not world.fake.networks


def test_quota_refusal_is_final_and_names_the_quota(world: WireWorld) -> None:
    cloud = world.cloud()
    cloud.create_bucket(PROJECT, "b1", "standard", GIB)
    cloud.create_bucket(PROJECT, "b2", "standard", GIB)  # storage.bucket.count: limit 3, usage 1 -> 3
    with pytest.raises(QuotaExceeded) as err:
        cloud.create_bucket(PROJECT, "b3", "standard", GIB)
    assert "storage.bucket.count" in str(err.value) and "limit 3" in str(err.value)
    assert codes(world, "BucketService/Create") == ["OK", "OK", "RESOURCE_EXHAUSTED"]


def test_a_failed_operation_maps_to_a_typed_error(world: WireWorld) -> None:
    world.fake.fail_operations_of(
        "BucketService/Create", grpc.StatusCode.RESOURCE_EXHAUSTED, "no room for buckets"
    )
    with pytest.raises(QuotaExceeded) as err:
        world.cloud().create_bucket(PROJECT, "b1", "standard", GIB)
    assert "no room for buckets" in str(err.value)
    assert err.value.request is not None and err.value.request.method == "storage.v1.BucketService.Create"


def test_a_slow_operation_times_out(world: WireWorld) -> None:
    world.fake.operation_polls = 10**6
    with pytest.raises(OperationTimeout) as err:
        world.cloud().create_network(PROJECT, "slow", timeout_s=0.4)
    assert "did not finish within 0.4s" in str(err.value)  # the caller's bound, not the operation's end
    assert not err.value.retryable
    assert len(world.fake.calls_to("NetworkService/Create")) == 1


def test_unknown_storage_class_is_refused_before_the_wire(world: WireWorld) -> None:
    with pytest.raises(InvalidArgument):
        world.cloud().create_bucket(PROJECT, "b1", "glacier", GIB)
    assert not world.fake.calls_to("BucketService/Create")


# ---------------------------------------------------------------------------- identity


def test_a_stale_ambient_token_is_stripped(world: WireWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", STALE_TOKEN)
    assert world.cloud().principal().subject == "useraccount-e00wire"
    assert {c.metadata["authorization"] for c in world.fake.calls} == {f"Bearer {TOKEN}"}


def test_reusing_the_ambient_token_is_opt_in(world: WireWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", STALE_TOKEN)
    monkeypatch.setenv("NPA_REUSE_IAM_TOKEN", "1")
    with pytest.raises(Unauthenticated):
        world.cloud().principal()
    assert {c.metadata["authorization"] for c in world.fake.calls} == {f"Bearer {STALE_TOKEN}"}


def test_a_reused_token_of_another_tenant_is_caught(
    world: WireWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The token decides the principal; the profile's tenant-id still pins where the fleet may go.
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", OTHER_TOKEN)
    monkeypatch.setenv("NPA_REUSE_IAM_TOKEN", "1")
    with pytest.raises(PermissionDenied) as err:
        world.cloud().principal()
    assert TENANT in str(err.value)


def test_profile_pinning(world: WireWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    world.write_config(
        {"a": world.profile(TOKEN, TENANT, "a"), "b": world.profile(OTHER_TOKEN, OTHER_TENANT, "b")},
        default="a",
    )
    assert world.cloud().principal().tenant_id == TENANT

    pinned = world.cloud(profile="b")
    seen = len(world.fake.calls)
    me = pinned.principal()
    assert (me.tenant_id, me.profile, me.subject) == (OTHER_TENANT, "b", "useraccount-e00other")
    with pytest.raises(PermissionDenied):
        pinned.list_projects(TENANT)
    assert {c.metadata["authorization"] for c in world.fake.calls[seen:]} == {f"Bearer {OTHER_TOKEN}"}

    monkeypatch.setenv("NEBIUS_PROFILE", "b")
    assert world.cloud().principal().tenant_id == OTHER_TENANT
    assert world.cloud(profile="a").principal().tenant_id == TENANT  # --profile wins


def test_an_explicit_profile_without_tenant_is_refused_before_any_call(world: WireWorld) -> None:
    world.write_config(
        {"a": world.profile(TOKEN, TENANT, "a"), "no-tenant": world.profile(TOKEN, None, "nt")}, default="a"
    )
    with pytest.raises(ProfileError) as err:
        world.cloud(profile="no-tenant")
    assert "no-tenant" in str(err.value) and "tenant-id" in str(err.value)
    with pytest.raises(ProfileError):
        world.cloud(profile="missing")
    with pytest.raises(ProfileError):
        world.cloud(tenant_id=OTHER_TENANT)  # the spec's tenant disagrees with the profile's
    assert world.fake.calls == []


def test_default_region_asks_nothing_without_a_parent_id(world: WireWorld) -> None:
    world.write_config({"a": world.profile(TOKEN, TENANT, "a")}, default="a")
    cloud = world.cloud()
    assert cloud.default_region() == ""
    credentials = world.service_account_credentials(PROJECT)
    assert world.cloud(credentials_file=str(credentials), tenant_id=TENANT).default_region() == ""
    assert world.fake.calls == []


def test_service_account_credentials_file(world: WireWorld) -> None:
    credentials = world.service_account_credentials(PROJECT)
    cloud = world.cloud(credentials_file=str(credentials), tenant_id=TENANT)
    me = cloud.principal()
    assert me.subject.startswith("serviceaccount-") and me.tenant_id == TENANT
    assert [p.id for p in cloud.list_projects(TENANT)] == [PROJECT]
    assert len(world.fake.calls_to("TokenExchangeService/Exchange")) == 1
    authed = [c for c in world.fake.calls if not c.method.endswith("/Exchange")]
    assert authed and all(c.metadata["authorization"].startswith("Bearer sa-token-") for c in authed)


def test_an_unknown_token_is_unauthenticated(world: WireWorld) -> None:
    world.write_config({"bad": world.profile("not-a-token", TENANT, "bad")}, default="bad")
    with pytest.raises(Unauthenticated):
        world.cloud().list_projects(TENANT)


def test_test_tls_with_a_private_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with wire_world(tmp_path, monkeypatch, tls=True) as world:
        assert world.cloud().principal().tenant_id == TENANT
        assert world.fake.calls[0].metadata["authorization"] == f"Bearer {TOKEN}"


# ---------------------------------------------------------------------------- object storage probe


def _bucket_and_key(world: WireWorld) -> tuple[Bucket, AccessKeySecret]:
    cloud = world.cloud()
    bucket = cloud.create_bucket(PROJECT, "probe-me", "standard", GIB)
    account = cloud.create_service_account(PROJECT, "npa-fleet-storage")
    cloud.grant_bucket_access(PROJECT, bucket.id, account.id, "npa-fleet-storage-access")
    return bucket, cloud.create_access_key(PROJECT, account.id)


def test_probe_writes_reads_and_deletes(world: WireWorld) -> None:
    bucket, key = _bucket_and_key(world)
    world.cloud().probe_bucket(bucket, key)
    methods = [(m, status) for m, _, status in world.s3_log.requests]
    assert methods == [("PUT", 200), ("GET", 200), ("DELETE", 204), ("GET", 404)]
    assert all(path.startswith("/probe-me/.npa-probe/") for _, path, _ in world.s3_log.requests)
    assert world.fake.objects["probe-me"] == {}


def test_the_grant_is_a_bucket_scoped_permit_of_a_project_group(world: WireWorld) -> None:
    # docs.nebius.com/iam/authorization/groups: a custom group in the project, the service account its
    # member, one access permit of that group on exactly the bucket; never the tenant's editors group.
    bucket, key = _bucket_and_key(world)
    [group] = world.fake.groups.values()
    assert (group.metadata.parent_id, group.metadata.name) == (PROJECT, "npa-fleet-storage-access")
    [member] = world.fake.memberships.values()
    assert (member.metadata.parent_id, member.spec.member_id) == (
        group.metadata.id,
        key.key.service_account_id,
    )
    [permit] = world.fake.permits.values()
    assert permit.metadata.parent_id == group.metadata.id
    assert (permit.spec.resource_id, permit.spec.role) == (bucket.id, "storage.object-editor")
    calls = [
        c.method.rsplit("/", 2)[-2:] for c in world.fake.calls if "Group" in c.method or "Permit" in c.method
    ]
    assert [tuple(c) for c in calls] == [
        ("nebius.iam.v1.GroupService", "GetByName"),
        ("nebius.iam.v1.GroupService", "Create"),
        ("nebius.iam.v1.GroupMembershipService", "ListMembers"),
        ("nebius.iam.v1.GroupMembershipService", "Create"),
        ("nebius.iam.v1.AccessPermitService", "List"),
        ("nebius.iam.v1.AccessPermitService", "Create"),
    ]
    world.cloud().probe_bucket(bucket, key)  # the key can use its bucket now
    # Another bucket of the project: the grant does not reach it.
    other = world.cloud().create_bucket(PROJECT, "not-granted", "standard", GIB)
    with pytest.raises(PermissionDenied, match="AccessDenied"):
        world.cloud().probe_bucket(other, key)


def test_probe_refuses_a_wrong_secret(world: WireWorld) -> None:
    bucket, key = _bucket_and_key(world)
    wrong = AccessKeySecret(key=key.key, secret=SecretStr("not-the-secret"))
    with pytest.raises(PermissionDenied) as err:
        world.cloud().probe_bucket(bucket, wrong)
    assert "SignatureDoesNotMatch" in str(err.value)


def test_probe_of_a_missing_bucket_is_not_found(world: WireWorld) -> None:
    bucket, key = _bucket_and_key(world)
    with pytest.raises(NotFound):
        world.cloud().probe_bucket(bucket.model_copy(update={"name": "no-such-bucket"}), key)


@pytest.mark.parametrize(
    ("control", "complaint"),
    [("s3_ignore_deletes", "still readable after delete"), ("s3_corrupt_reads", "read back differs")],
)
def test_probe_fails_unless_write_read_and_delete_are_all_proven(
    world: WireWorld, control: str, complaint: str
) -> None:
    bucket, key = _bucket_and_key(world)
    setattr(world.fake, control, True)
    with pytest.raises(FailedPrecondition, match=complaint):
        world.cloud().probe_bucket(bucket, key)


def test_nothing_secret_in_logs_reprs_or_errors(world: WireWorld, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    cloud = world.cloud()
    bucket, key = _bucket_and_key(world)
    cloud.probe_bucket(bucket, key)
    world.fake.fail_next("ProjectService/Get", grpc.StatusCode.UNAVAILABLE, times=1)
    cloud.get_project(PROJECT)  # one retry, logged
    with pytest.raises(PermissionDenied) as err:
        cloud.probe_bucket(
            bucket, AccessKeySecret(key=key.key, secret=SecretStr("x" + key.secret.get_secret_value()))
        )

    secret = key.secret.get_secret_value()
    assert "retrying" in caplog.text  # the log was really captured
    for text in (caplog.text, repr(cloud), repr(key), str(key), str(err.value), repr(err.value)):
        assert secret not in text
        assert TOKEN not in text


# ---------------------------------------------------------------------------- kubeconfigs


def test_a_nebius_kubeconfig_uses_the_cli_pinned_to_the_profile(world: WireWorld) -> None:
    """No token is written: the nebius CLI mints one per kubectl call, as the fleet's profile."""
    import base64

    import yaml
    from wire.fake import FAKE_CLUSTER_CA

    from npa_pulumi.kube.kubeconfig import dump

    world.write_config(
        {"a": world.profile(OTHER_TOKEN, OTHER_TENANT, "a"), "fleet": world.profile(TOKEN, TENANT, "fleet")},
        default="a",  # the active profile is another tenant's: the kubeconfig must not depend on it
    )
    cluster_id = world.fake.add_cluster(PROJECT, "train")
    access = world.cloud(profile="fleet").cluster_access(cluster_id)
    config = yaml.safe_load(dump(access.kubeconfig("fleet-f-p-train")))

    assert config["current-context"] == "fleet-f-p-train"
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == f"https://{cluster_id}.mk8s.test:443"
    assert base64.b64decode(cluster["certificate-authority-data"]).decode() == FAKE_CLUSTER_CA
    user = config["users"][0]["user"]
    assert set(user) == {"exec"}  # no token, no client key
    exec_spec = user["exec"]
    assert exec_spec["command"] == "nebius"
    assert exec_spec["apiVersion"] == "client.authentication.k8s.io/v1"
    assert exec_spec["interactiveMode"] == "Never"
    args = exec_spec["args"]
    assert args[args.index("--profile") + 1] == "fleet"
    assert args[:5] == ["--no-browser", "mk8s", "v1", "cluster", "get-token"]
    assert TOKEN not in dump(access.kubeconfig("fleet-f-p-train"))
    calls = world.fake.calls_to("ClusterService/Get")
    assert [c.request.id for c in calls] == [cluster_id]
    assert {c.metadata["authorization"] for c in calls} == {f"Bearer {TOKEN}"}
