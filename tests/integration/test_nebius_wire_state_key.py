"""Keyless CI's state bucket: a federated run against an s3:// backend, with no AWS credentials anywhere,
mints a short-lived access key for its own service account, uses it for the Pulumi engine's DIY backend
and npa-pulumi's own reads of it, and deletes it when it ends (engine/automation/state_key.py).

The parts are real: the `nebius` adapter (official SDK) authenticates by federated exchange with the wire
fake of the Nebius API, which serves IAM v2 `AccessKeyService` (a service account may create and delete
keys only of itself, and only with the grant `backend init` prints) and takes each key's material from a
real S3 server, SeaweedFS with identities the test sets (tests/integration/s3_support.py, `keyed_s3`):
that server accepts a request only when it is signed with a live key allowed the bucket, so the state is
readable exactly while the minted key exists.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import CliResult, npa
from s3_support import KeyedS3
from wire.coverage import RecordingCloud, covers
from wire.fleet import EXISTING_PROJECT, RECIPE
from wire.fleet import KEYLESS_SPEC as SPEC
from wire.oidc import REQUEST_TOKEN
from wire.world import TENANT, Federation, WireWorld, federation, wire_world

from npa_pulumi.cloud.errors import PermissionDenied

pytestmark = pytest.mark.integration

PROJECT = EXISTING_PROJECT
CREATE = "AccessKeyService/Create"
DELETE = "AccessKeyService/Delete"
LIFETIME_S = 1800


@dataclass
class StateBucket:
    """The CI account's bucket on the keyed S3 server, and every key the fake minted there for it."""

    s3: KeyedS3
    bucket: str
    user: str
    minted: list[tuple[str, str]] = field(default_factory=list)  # (AWS key id, secret), in order

    @property
    def url(self) -> str:
        return self.s3.server.backend_url(self.bucket)

    def objects(self) -> dict[str, bytes]:
        client = self.s3.server.client()
        return {
            key: client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            for key in self.s3.server.keys(self.bucket)
        }


@dataclass
class Run:
    world: WireWorld
    ci: Federation
    state: StateBucket
    tmp: Path
    passphrase: Path

    def fleet(self, command: str, *extra: str) -> CliResult:
        spec = self.tmp / "fleet.yaml"
        spec.write_text(SPEC, encoding="utf-8")
        return npa(
            command,
            "--spec",
            str(spec),
            "--cloud",
            "nebius",
            "--auth",
            "federated",
            "--recipe-dir",
            str(RECIPE),
            "--backend",
            self.state.url,
            "--passphrase-file",
            str(self.passphrase),
            "--output",
            "json",
            *extra,
            timeout=600,
        )

    def seed_project_stack(self, outputs: dict[str, Any]) -> None:
        """The fleet's project stack in the bucket, holding only the outputs a deployed one has: written by an
        operator with a key of their own (the server's administrator), which is gone again afterwards."""
        from npa_pulumi.engine.automation.workspace import EngineSettings, select_or_create_stack

        def program() -> None:
            import pulumi

            for key, value in outputs.items():
                pulumi.export(key, value)

        admin = self.state.s3.server
        with pytest.MonkeyPatch.context() as env:
            env.setenv("AWS_ACCESS_KEY_ID", admin.access_key)
            env.setenv("AWS_SECRET_ACCESS_KEY", admin.secret_key)
            settings = EngineSettings.resolve(self.state.url, self.passphrase)
            stack = select_or_create_stack(settings, f"keyless.{PROJECT}", program)
            stack.up(on_output=lambda _line: None)

    def secrets(self) -> list[str]:
        exchanged = [t for t, info in self.world.fake.tokens.items() if info.via == "federated"]
        keys = [part for pair in self.state.minted for part in pair]
        return [REQUEST_TOKEN, *self.ci.github.issued, *exchanged, *keys]

    def assert_nothing_leaked(self, *results: CliResult, files: int = 5) -> None:
        """No key, token or secret in what the runs printed, in any file under HOME (logs, work dirs, the
        engine's own files) or in the state bucket (more than `files` of them: they were really read)."""
        written = [text for r in results for text in (r.stdout, r.stderr)]
        for path in self.world.home.rglob("*"):
            if path.is_file():
                written.append(path.read_bytes().decode("utf-8", "replace"))
        written += [body.decode("utf-8", "replace") for body in self.state.objects().values()]
        assert len(written) > 2 * len(results) + files
        for text in written:
            for secret in self.secrets():
                assert secret not in text


@pytest.fixture
def run(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keyed_s3: KeyedS3
) -> Iterator[Run]:
    with wire_world(tmp_path, monkeypatch) as world, federation(world, PROJECT) as ci:
        bucket = "npa-state-" + secrets.token_hex(4)
        keyed_s3.server.client().create_bucket(Bucket=bucket)
        state = StateBucket(keyed_s3, bucket, "npa-ci-preview")
        keyed_s3.add_user(state.user, bucket)

        def material(service_account_id: str) -> tuple[str, str]:
            assert service_account_id == ci.service_account_id  # the fake checked it already
            pair = keyed_s3.new_key(state.user)
            state.minted.append(pair)
            return pair

        world.fake.access_key_material = material
        world.fake.access_key_deleted = lambda key_id: keyed_s3.delete_key(state.user, key_id)
        world.fake.access_key_creators.add(ci.service_account_id)  # the grant backend init prints
        monkeypatch.setenv("NPA_STATE_KEY_LIFETIME_S", str(LIFETIME_S))
        passphrase = tmp_path / "passphrase"
        passphrase.write_text("wire-test-passphrase\n", encoding="utf-8")
        passphrase.chmod(0o600)
        yield Run(world, ci, state, tmp_path, passphrase)


def key_calls(world: WireWorld, method: str) -> list[Any]:
    return world.fake.calls_to(method)


def test_a_federated_preview_mints_its_state_key_uses_it_and_deletes_it(run: Run) -> None:
    started = datetime.now(UTC)
    result = run.fleet("preview", "--no-preflight")
    assert result.code == 0, result.stdout[-3000:] + result.stderr[-3000:]
    document = result.json()
    assert document["ok"] is True and document["cloud"] == "nebius"
    assert f"a key to state bucket {run.state.bucket} for {run.ci.service_account_id}" in result.stderr

    fake = run.world.fake
    (create,) = key_calls(run.world, CREATE)
    assert create.code == "OK"
    spec = create.request.spec
    assert spec.account.service_account.id == run.ci.service_account_id
    assert create.request.metadata.parent_id == PROJECT  # the account's own project
    expires = spec.expires_at
    assert (
        started + timedelta(seconds=LIFETIME_S - 5)
        <= expires
        <= datetime.now(UTC) + timedelta(seconds=LIFETIME_S)
    )
    # Minted by the service account itself, with its exchanged (federated) token.
    bearer = create.metadata["authorization"].removeprefix("Bearer ")
    assert fake.tokens[bearer].via == "federated" and fake.tokens[bearer].subject == run.ci.service_account_id

    # The engine wrote the stacks into the bucket: the minted key is the only one that could sign there.
    objects = run.state.objects()
    assert any(key.startswith(".pulumi/stacks/npa-fleet/keyless.") for key in objects), sorted(objects)

    # Deleted when the run ended: in the Nebius API and on the S3 server, which now refuses it.
    (delete,) = key_calls(run.world, DELETE)
    assert (
        delete.code == "OK" and delete.request.id == fake.calls_to("AccessKeyService/GetSecret")[0].request.id
    )
    assert fake.access_keys == {} and run.state.s3.keys_of(run.state.user) == []
    ((key_id, secret),) = run.state.minted
    with pytest.raises(Exception, match=r"InvalidAccessKeyId|AccessDenied"):
        run.state.s3.client_with(key_id, secret).list_objects_v2(Bucket=run.state.bucket)
    run.assert_nothing_leaked(result)


def test_status_reads_the_state_with_a_key_of_its_own(run: Run) -> None:
    run.seed_project_stack({"project_id": PROJECT, "subnet_id": "vpcsubnet-e00wire"})
    preview = run.fleet("preview", "--no-preflight")
    assert preview.code == 0, preview.stderr[-3000:]
    (cluster,) = preview.json()["clusters"]
    assert cluster["terraform"]["add"] > 0, cluster  # the project stack's outputs were read: the plan ran
    status = run.fleet("status")
    assert status.code == 0, status.stdout[-3000:] + status.stderr[-3000:]
    document = status.json()
    # The cluster stack the preview created in the bucket, read back with status's own key: it exists
    # (an unreadable or missing checkpoint is "absent") and records no cluster yet.
    (stack,) = document["stacks"]
    assert stack["stack"] == f"keyless.{PROJECT}.ci" and stack["status"] == "unknown", stack
    assert "records no cluster" in stack["error"]
    # One key per run, each deleted as its run ended: nothing is left to expire.
    assert [c.code for c in key_calls(run.world, CREATE)] == ["OK", "OK"]
    assert [c.code for c in key_calls(run.world, DELETE)] == ["OK", "OK"]
    assert len({key for key, _ in run.state.minted}) == 2
    assert run.world.fake.access_keys == {} and run.state.s3.keys_of(run.state.user) == []
    run.assert_nothing_leaked(preview, status)


def test_a_refused_mint_fails_the_run_with_exit_1_naming_the_grant(run: Run) -> None:
    run.world.fake.access_key_creators.clear()  # the account may not create keys
    result = run.fleet("preview", "--no-preflight")
    assert result.code == 1, result.stdout[-3000:] + result.stderr[-3000:]
    error = result.json()["error"]
    assert error["kind"] == "state-key"
    message = error["message"]
    assert f"refused to mint a key to state bucket {run.state.bucket}" in message
    assert f"role `admin` on its own project {PROJECT}" in message and "backend init" in message
    assert "Traceback" not in result.stderr
    assert [c.code for c in key_calls(run.world, CREATE)] == ["PERMISSION_DENIED"]
    assert run.state.minted == [] and run.state.s3.server.keys(run.state.bucket) == []  # nothing ran
    run.assert_nothing_leaked(result, files=0)


def test_a_key_without_the_buckets_grant_fails_before_the_engine_naming_the_role(run: Run) -> None:
    run.state.s3.grant(run.state.user, "someone-elses-bucket")  # the account holds no role on the bucket
    result = run.fleet("preview", "--no-preflight")
    assert result.code == 1, result.stdout[-3000:] + result.stderr[-3000:]
    message = result.json()["error"]["message"]
    assert f"may not read the bucket (AccessDenied): a group {run.ci.service_account_id}" in message
    assert "`storage.object-editor` on the bucket" in message and "Traceback" not in result.stderr
    # Minted, refused by S3, deleted at once: nothing is left to expire, and the engine never ran.
    assert [c.code for c in key_calls(run.world, CREATE)] == ["OK"]
    assert [c.code for c in key_calls(run.world, DELETE)] == ["OK"]
    assert run.world.fake.access_keys == {} and run.state.s3.keys_of(run.state.user) == []
    assert run.state.s3.server.keys(run.state.bucket) == []
    run.assert_nothing_leaked(result, files=0)


def test_doctor_mints_reads_the_bucket_with_it_and_deletes_it(run: Run) -> None:
    result = npa(
        "doctor", "--cloud", "nebius", "--auth", "federated", "--backend", run.state.url, "--output", "json"
    )
    checks = {c["name"]: c for c in result.json()["checks"]}
    state_key = checks["state-key"]
    assert state_key["status"] == "ok", state_key
    assert run.ci.service_account_id in state_key["summary"] and "deleted" in state_key["summary"]
    assert checks["backend"]["status"] == "ok", checks["backend"]  # read with the minted key
    (create,) = key_calls(run.world, CREATE)
    expires = create.request.spec.expires_at
    assert expires <= datetime.now(UTC) + timedelta(minutes=11)  # minutes, not the run's hours
    assert [c.code for c in key_calls(run.world, DELETE)] == ["OK"]
    assert run.state.s3.keys_of(run.state.user) == []

    run.world.fake.access_key_creators.clear()
    refused = npa(
        "doctor", "--cloud", "nebius", "--auth", "federated", "--backend", run.state.url, "--output", "json"
    )
    state_key = {c["name"]: c for c in refused.json()["checks"]}["state-key"]
    assert refused.code == 1 and state_key["status"] == "fail"
    assert "refused to mint" in state_key["summary"] and "backend init" in state_key["fix"]
    run.assert_nothing_leaked(result, refused, files=0)


# ------------------------------------------------------------------ the fake's AccessKeyService, directly


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WireWorld]:
    with wire_world(tmp_path, monkeypatch) as w:
        yield w


@covers("principal", "create_access_key", "delete_access_key", "list_access_keys")
def test_a_service_account_mints_a_temporary_key_of_its_own_only(world: WireWorld) -> None:
    with federation(world, PROJECT) as ci:
        cloud = RecordingCloud(world.cloud(auth="federated"))
        principal = cloud.principal()
        assert (principal.subject, principal.project_id, principal.tenant_id) == (
            ci.service_account_id,
            PROJECT,
            TENANT,
        )
        with pytest.raises(PermissionDenied, match="no permission to create access keys"):
            cloud.create_access_key(
                PROJECT, ci.service_account_id, expires_at=datetime.now(UTC) + timedelta(hours=1)
            )
        world.fake.access_key_creators.add(ci.service_account_id)
        other = world.fake.add_service_account(PROJECT, "someone-else")
        with pytest.raises(PermissionDenied, match="may not manage access keys of another account"):
            cloud.create_access_key(PROJECT, other, expires_at=datetime.now(UTC) + timedelta(hours=1))

        expires = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
        created = cloud.create_access_key(PROJECT, ci.service_account_id, expires_at=expires)
        assert created.key.expires_at == expires and created.key.state == "ACTIVE"
        assert world.fake.secret_for(created.key.aws_access_key_id) == created.secret.get_secret_value()
        time.sleep(3.2)
        (listed,) = cloud.list_access_keys(PROJECT, ci.service_account_id)
        assert listed.state == "EXPIRED"
        assert world.fake.secret_for(created.key.aws_access_key_id) is None  # S3 refuses it now
        cloud.delete_access_key(created.key.id)
        assert cloud.list_access_keys(PROJECT, ci.service_account_id) == []
        assert cloud.called == {"principal", "create_access_key", "delete_access_key", "list_access_keys"}
