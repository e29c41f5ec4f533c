"""A federated run's key to its s3:// state bucket (engine/automation/state_key.py): when one is minted, for
how long, where it is kept (this process's environment only), that it is deleted at release, and that an
expired or refused mint is a clear error naming what to grant. The cloud here is a recording stand-in of
the port's three calls the module makes; tests/integration/test_nebius_wire_state_key.py runs it through
the real adapter, the Nebius wire fake and a real S3 server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from pydantic import SecretStr

from npa_pulumi.cloud.errors import CloudRequest, InvalidArgument, PermissionDenied, Unavailable
from npa_pulumi.cloud.port import AccessKey, AccessKeySecret, CloudPort, Principal
from npa_pulumi.engine.automation import StateKeyError, StateKeys
from npa_pulumi.engine.automation.state_key import DEFAULT_LIFETIME_S, lifetime_s
from npa_pulumi.errors import UserInputError

URL = "s3://fleet-state?endpoint=https://storage.eu-north1.nebius.cloud&region=eu-north1"
ACCOUNT = "serviceaccount-e00ci"
PROJECT = "project-e00ci"
SECRET = "the-minted-secret-value-0123456789"
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_SESSION_TOKEN",
    "NPA_NEBIUS_AUTH",
    "NPA_STATE_KEY_LIFETIME_S",
)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


class KeyCloud:
    """The port's principal, create_access_key and delete_access_key, recorded."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.refuse: Exception | None = None
        self.refuse_delete: Exception | None = None
        self.answer_expires: datetime | str | None = "as-asked"
        self.answer_state = "ACTIVE"

    def principal(self) -> Principal:
        return Principal(tenant_id="tenant-e00ci", subject=ACCOUNT, project_id=PROJECT)

    def create_access_key(
        self,
        project_id: str,
        service_account_id: str,
        timeout_s: float = 600.0,
        expires_at: datetime | None = None,
    ) -> AccessKeySecret:
        self.created.append({"project": project_id, "account": service_account_id, "expires_at": expires_at})
        if self.refuse is not None:
            raise self.refuse
        n = len(self.created)
        answer = expires_at if self.answer_expires == "as-asked" else self.answer_expires
        key = AccessKey(
            id=f"accesskey-e00{n}",
            service_account_id=service_account_id,
            project_id=project_id,
            aws_access_key_id=f"NAKIMINTED{n:010d}",
            state=self.answer_state,
            expires_at=cast("datetime | None", answer),
        )
        return AccessKeySecret(key=key, secret=SecretStr(f"{SECRET}-{n}"))

    def delete_access_key(self, access_key_id: str, timeout_s: float = 600.0) -> None:
        self.deleted.append(access_key_id)
        if self.refuse_delete is not None:
            raise self.refuse_delete


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    yield
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.pop(name, None)  # whatever a failed test left behind


@pytest.fixture
def clock() -> Clock:
    return Clock()


class Bucket:
    """The probe's view of the bucket: the answers S3 gives the new key, one per try (then the last one)."""

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers) or [None]
        self.tries: list[tuple[str, str, str]] = []
        self.slept: list[float] = []

    def probe(self, backend_url: str, key_id: str, secret: SecretStr) -> str | None:
        self.tries.append((backend_url, key_id, secret.get_secret_value()))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.fixture
def bucket() -> Bucket:
    return Bucket()


@pytest.fixture
def keys(clock: Clock, bucket: Bucket) -> StateKeys:
    return StateKeys(clock=clock, probe=bucket.probe, sleep=bucket.slept.append, ready_timeout_s=10)


def port(cloud: KeyCloud) -> CloudPort:
    return cast(CloudPort, cloud)


def test_a_key_is_wanted_only_for_a_federated_nebius_run_on_s3_without_given_credentials(
    keys: StateKeys,
) -> None:
    assert keys.wanted(URL, "nebius", "federated", {})
    assert keys.wanted(URL, "nebius", None, {"NPA_NEBIUS_AUTH": "federated"})  # what the workflows set
    assert not keys.wanted(URL, "nebius", None, {})  # a profile: the operator's own key, as before
    assert not keys.wanted(URL, "nebius", "auto", {"NPA_NEBIUS_AUTH": "federated"})  # the flag wins
    assert not keys.wanted(URL, "local", "federated", {})
    assert not keys.wanted("file:///state", "nebius", "federated", {})
    assert not keys.wanted("https://api.pulumi.com", "nebius", "federated", {})
    for given in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        assert not keys.wanted(URL, "nebius", "federated", {given: "x"}), given
    assert not keys.wanted(URL, "nebius", "federated", {"AWS_SHARED_CREDENTIALS_FILE": "/creds"})


def test_the_lifetime_defaults_to_two_hours_and_is_settable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert lifetime_s({}) == DEFAULT_LIFETIME_S == 7200
    assert lifetime_s({"NPA_STATE_KEY_LIFETIME_S": "11400"}) == 11400
    for bad in ("soon", "59", "-1", "1.5"):
        with pytest.raises(UserInputError, match="NPA_STATE_KEY_LIFETIME_S") as err:
            lifetime_s({"NPA_STATE_KEY_LIFETIME_S": bad})
        assert err.value.exit_code == 2


def test_a_minted_key_lives_in_the_environment_for_the_run_and_is_deleted_at_release(
    keys: StateKeys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_STATE_KEY_LIFETIME_S", "5400")
    cloud = KeyCloud()
    minted = keys.ensure(URL, "nebius", "federated", lambda: port(cloud))
    assert minted is not None
    (asked,) = cloud.created
    assert asked == {"project": PROJECT, "account": ACCOUNT, "expires_at": NOW + timedelta(seconds=5400)}
    assert os.environ["AWS_ACCESS_KEY_ID"] == "NAKIMINTED0000000001"
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == f"{SECRET}-1"
    assert minted.describe() == (
        f"a key to state bucket fleet-state for {ACCOUNT}, expiring 2026-01-02 04:34 UTC"
    )
    # Held, the key is the run's own, not an operator's: a second run of the process reuses it.
    assert keys.wanted(URL, "nebius", "federated")
    assert keys.ensure(URL, "nebius", "federated", lambda: port(cloud)) is minted
    assert len(cloud.created) == 1

    assert keys.release() == []
    assert cloud.deleted == ["accesskey-e001"]
    assert "AWS_ACCESS_KEY_ID" not in os.environ and "AWS_SECRET_ACCESS_KEY" not in os.environ
    assert keys.release() == [] and cloud.deleted == ["accesskey-e001"]  # released once


def test_a_key_past_half_its_life_is_replaced_and_both_are_deleted(keys: StateKeys, clock: Clock) -> None:
    cloud = KeyCloud()
    first = keys.ensure(URL, "nebius", "federated", lambda: port(cloud))
    clock.now = NOW + timedelta(seconds=DEFAULT_LIFETIME_S / 2 + 1)
    second = keys.ensure(URL, "nebius", "federated", lambda: port(cloud))
    assert first is not None and second is not None and second is not first
    assert os.environ["AWS_ACCESS_KEY_ID"] == second.key.aws_access_key_id
    assert keys.release() == []
    assert cloud.deleted == ["accesskey-e001", "accesskey-e002"]


def test_another_bucket_gets_a_key_checked_against_it(keys: StateKeys, bucket: Bucket) -> None:
    cloud = KeyCloud()
    first = keys.ensure(URL, "nebius", "federated", lambda: port(cloud))
    other_url = URL.replace("fleet-state", "other-state")
    second = keys.ensure(other_url, "nebius", "federated", lambda: port(cloud))
    assert first is not None and second is not None and second.bucket == "other-state"
    assert [url for url, _, _ in bucket.tries] == [URL, other_url]
    assert keys.release() == [] and cloud.deleted == ["accesskey-e001", "accesskey-e002"]


def test_given_credentials_are_used_as_they_are(keys: StateKeys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAOPERATOR")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "operator-secret")
    cloud = KeyCloud()
    assert keys.ensure(URL, "nebius", "federated", lambda: port(cloud)) is None
    assert cloud.created == [] and os.environ["AWS_ACCESS_KEY_ID"] == "AKIAOPERATOR"
    assert keys.release() == [] and os.environ["AWS_SECRET_ACCESS_KEY"] == "operator-secret"


def test_the_new_key_reads_the_bucket_before_the_run_uses_it(keys: StateKeys, bucket: Bucket) -> None:
    bucket.answers = ["InvalidAccessKeyId", "InvalidAccessKeyId", None]  # S3 learns of a new key late
    minted = keys.ensure(URL, "nebius", "federated", lambda: port(KeyCloud()))
    assert minted is not None
    assert bucket.tries == [(URL, "NAKIMINTED0000000001", f"{SECRET}-1")] * 3 and bucket.slept == [1.0, 2.0]
    assert os.environ["AWS_ACCESS_KEY_ID"] == "NAKIMINTED0000000001"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("AccessDenied", "may not read the bucket (AccessDenied): a group serviceaccount-e00ci is a member"),
        ("NoSuchBucket", "state bucket fleet-state does not exist (`npa-pulumi backend init` creates it)"),
        ("InvalidAccessKeyId", "still does not know it after 15 s (InvalidAccessKeyId)"),
    ],
)
def test_a_key_that_cannot_read_the_bucket_is_deleted_and_says_why(
    keys: StateKeys, bucket: Bucket, answer: str, said: str
) -> None:
    bucket.answers = [answer]
    cloud = KeyCloud()
    with pytest.raises(StateKeyError) as err:
        keys.ensure(URL, "nebius", "federated", lambda: port(cloud))
    assert said in str(err.value) and err.value.exit_code == 1
    if answer == "AccessDenied":
        assert "`storage.object-editor` on the bucket" in str(err.value)
    assert cloud.deleted == ["accesskey-e001"]  # not left to expire
    assert "AWS_ACCESS_KEY_ID" not in os.environ and keys.held is None and keys.release() == []


def test_an_unreachable_bucket_endpoint_is_an_operation_failure(keys: StateKeys) -> None:
    def unreachable(backend_url: str, key_id: str, secret: SecretStr) -> str | None:
        raise ConnectionRefusedError(111, "Connection refused")

    cloud = KeyCloud()
    broken = StateKeys(probe=unreachable)
    with pytest.raises(StateKeyError, match=r"state bucket fleet-state is unreachable: .*Connection refused"):
        broken.ensure(URL, "nebius", "federated", lambda: port(cloud))
    assert cloud.deleted == ["accesskey-e001"]


def test_a_refused_mint_names_what_to_grant_and_changes_nothing(keys: StateKeys) -> None:
    cloud = KeyCloud()
    cloud.refuse = PermissionDenied(
        f"{ACCOUNT} has no permission to create access keys in project {PROJECT}",
        CloudRequest("iam.v2.AccessKeyService.Create"),
    )
    with pytest.raises(StateKeyError) as err:
        keys.ensure(URL, "nebius", "federated", lambda: port(cloud))
    message = str(err.value)
    assert err.value.exit_code == 1
    assert f"refused to mint a key to state bucket fleet-state for {ACCOUNT}" in message
    assert "no permission to create access keys" in message  # what Nebius said
    assert f"role `admin` on its own project {PROJECT}" in message and "backend init" in message
    assert "AWS_ACCESS_KEY_ID" in message  # the other way out
    assert "AWS_ACCESS_KEY_ID" not in os.environ and keys.held is None
    assert keys.release() == [] and cloud.deleted == []


def test_an_expiry_the_cloud_refuses_names_the_setting(keys: StateKeys) -> None:
    cloud = KeyCloud()
    cloud.refuse = InvalidArgument("expires_at is too far", CloudRequest("iam.v2.AccessKeyService.Create"))
    with pytest.raises(StateKeyError, match="NPA_STATE_KEY_LIFETIME_S") as err:
        keys.ensure(URL, "nebius", "federated", lambda: port(cloud))
    assert "expiring 2026-01-02 05:04 UTC: expires_at is too far" in str(err.value)


def test_an_unreachable_cloud_is_an_operation_failure(keys: StateKeys) -> None:
    cloud = KeyCloud()
    cloud.refuse = Unavailable("connection refused", CloudRequest("iam.v2.AccessKeyService.Create"))
    with pytest.raises(StateKeyError, match="could not mint a key to state bucket fleet-state") as err:
        keys.ensure(URL, "nebius", "federated", lambda: port(cloud))
    assert err.value.exit_code == 1


@pytest.mark.parametrize(
    ("expires", "state"),
    [(NOW - timedelta(seconds=1), "ACTIVE"), (NOW + timedelta(hours=2), "EXPIRED")],
    ids=["expires-in-the-past", "state-expired"],
)
def test_an_expired_mint_is_refused_and_the_key_deleted(
    keys: StateKeys, expires: datetime, state: str
) -> None:
    cloud = KeyCloud()
    cloud.answer_expires, cloud.answer_state = expires, state
    with pytest.raises(StateKeyError, match="had already expired") as err:
        keys.ensure(URL, "nebius", "federated", lambda: port(cloud))
    assert "clock" in str(err.value) and "NPA_STATE_KEY_LIFETIME_S" in str(err.value)
    assert cloud.deleted == ["accesskey-e001"]
    assert "AWS_ACCESS_KEY_ID" not in os.environ and keys.held is None


def test_a_failed_deletion_is_reported_never_raised(keys: StateKeys) -> None:
    cloud = KeyCloud()
    keys.ensure(URL, "nebius", "federated", lambda: port(cloud))
    cloud.refuse_delete = Unavailable("connection reset", CloudRequest("iam.v2.AccessKeyService.Delete"))
    (failure,) = keys.release()
    assert "could not delete a key to state bucket fleet-state" in failure and "connection reset" in failure
    assert "AWS_ACCESS_KEY_ID" not in os.environ


def test_no_secret_in_what_the_module_says(keys: StateKeys) -> None:
    cloud = KeyCloud()
    minted = keys.ensure(URL, "nebius", "federated", lambda: port(cloud))
    assert minted is not None
    cloud.refuse_delete = Unavailable("gone", CloudRequest("iam.v2.AccessKeyService.Delete"))
    texts = [repr(minted), minted.describe(), repr(keys.held), *keys.release()]
    for text in texts:
        assert SECRET not in text and "NAKIMINTED" not in text
