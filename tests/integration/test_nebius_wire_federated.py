"""Keyless CI (`--auth federated`) through the official SDK's federated-credentials provider to the wire fake.

The job's OIDC token comes from a loopback GitHub Actions endpoint (tests/wire/oidc.py) or a token file; the
SDK's `FederatedCredentialsBearer` exchanges it at `TokenExchangeService/Exchange` (the service account as
subject, the OIDC token as actor), and the fake verifies it the way federated credentials say: issuer and
`sub` trusted for that account, signature against the issuer's JWKS, not expired, the accepted audience.
Exchanged tokens expire in the fake (it refuses them afterwards), so renewal is observable.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from wire.coverage import RecordingCloud, covers, declared
from wire.fleet import EXISTING_PROJECT, RECIPE, REPO
from wire.fleet import KEYLESS_SPEC as SPEC
from wire.oidc import REQUEST_TOKEN
from wire.world import TENANT, Federation, WireWorld, federation, wire_world

from npa_pulumi.cloud.errors import PermissionDenied, Unauthenticated
from npa_pulumi.cloud.nebius.profile import ProfileError

pytestmark = pytest.mark.integration

PROJECT = EXISTING_PROJECT
EXCHANGE = "TokenExchangeService/Exchange"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WireWorld]:
    with wire_world(tmp_path, monkeypatch) as w:
        yield w


@pytest.fixture
def ci(world: WireWorld) -> Iterator[Federation]:
    with federation(world, PROJECT) as f:
        yield f


@pytest.fixture
def recorded(request: pytest.FixtureRequest, world: WireWorld) -> Iterator[Callable[..., Any]]:
    """Federated adapters built like `world.cloud(...)`, recorded; a test must call what it `@covers`."""
    clouds: list[RecordingCloud] = []

    def make(**options: Any) -> Any:
        cloud = RecordingCloud(world.cloud(auth="federated", **options))
        clouds.append(cloud)
        return cloud

    yield make
    called = set().union(*(c.called for c in clouds)) if clouds else set()
    missing = declared(request.function) - called
    assert not missing, f"{request.function.__name__} declares {sorted(missing)} but never calls them"


def exchanges(world: WireWorld) -> list[Any]:
    return world.fake.calls_to(EXCHANGE)


def bearer(call: Any) -> str:
    return str(call.metadata["authorization"]).removeprefix("Bearer ")


def used_tokens(world: WireWorld) -> list[str]:
    """The bearer of every authenticated call, in order."""
    return [
        c.metadata["authorization"].removeprefix("Bearer ")
        for c in world.fake.calls
        if "authorization" in c.metadata and not c.method.endswith(EXCHANGE)
    ]


@covers("principal", "list_projects", "default_region")
def test_a_github_actions_token_is_exchanged_for_the_service_accounts_token(
    world: WireWorld, ci: Federation, recorded: Callable[..., Any]
) -> None:
    cloud = recorded()
    principal = cloud.principal()
    # The account's own tenant (no profile, no tenant given): read from its project.
    assert (principal.subject, principal.tenant_id, principal.profile) == (ci.service_account_id, TENANT, "")
    assert [p.id for p in cloud.list_projects(TENANT)] == [PROJECT]
    assert cloud.default_region() == "eu-north1"  # the account's project's region

    (exchange,) = exchanges(world)
    assert exchange.code == "OK"
    request = exchange.request
    assert request.subject_token == ci.service_account_id
    assert request.subject_token_type == "urn:nebius:params:oauth:token-type:subject_identifier"
    assert request.actor_token == ci.github.issued[0]  # GitHub's token, as the actor
    assert ci.github.audiences == [None]  # no audience configured: GitHub's default
    minted = {t for t, info in world.fake.tokens.items() if info.via == "federated"}
    assert set(used_tokens(world)) <= minted and used_tokens(world)  # every call used the exchanged token


@covers("principal")
def test_the_configured_audience_is_asked_of_github(
    world: WireWorld, ci: Federation, recorded: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    world.fake.federated_audience = "nebius-wire"
    monkeypatch.setenv("NPA_NEBIUS_FEDERATED_AUDIENCE", "nebius-wire")
    assert recorded().principal().subject == ci.service_account_id
    assert ci.github.audiences == ["nebius-wire"]


@covers("principal", "list_projects", "access_token")
def test_the_token_is_renewed_as_it_expires_with_a_fresh_oidc_token(
    world: WireWorld, ci: Federation, recorded: Callable[..., Any]
) -> None:
    world.fake.exchanged_token_life_s = 3  # the SDK renews at 90% of a token's life
    cloud = recorded()
    assert cloud.principal().subject == ci.service_account_id
    first = used_tokens(world)[-1]
    deadline = time.monotonic() + 4.5
    while time.monotonic() < deadline:  # calls straddle the first token's expiry
        cloud.list_projects(TENANT)
        time.sleep(0.3)
    # Every list succeeded (none raised). Past the first token's expiry the calls carried renewed tokens:
    # the fake refuses an expired one (were a renewal late, the SDK re-authenticates and retries).
    expired_at = world.fake.tokens[first].expires_at or 0.0
    late = [c for c in world.fake.calls if not c.method.endswith(EXCHANGE) and c.at > expired_at]
    assert late and all(bearer(c) != first for c in late if c.code == "OK")
    assert any(c.code == "OK" for c in late)
    assert len(exchanges(world)) >= 2 and all(c.code == "OK" for c in exchanges(world))
    # Each exchange carried a GitHub token of its own: a five-minute OIDC token is never reused.
    actors = [c.request.actor_token for c in exchanges(world)]
    assert len(set(actors)) == len(actors) and set(actors) <= set(ci.github.issued)

    # Terraform's token (TF_VAR_iam_token) is a synchronous renewal: a new exchange, a new token.
    seen = len(exchanges(world))
    minted = cloud.access_token().get_secret_value()
    assert len(exchanges(world)) == seen + 1
    assert world.fake.tokens[minted].via == "federated" and minted != used_tokens(world)[-1]


@covers("principal")
def test_a_wrong_audience_is_refused_at_once_with_what_to_check(
    world: WireWorld, ci: Federation, recorded: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    world.fake.federated_audience = "nebius-wire"
    monkeypatch.setenv("NPA_NEBIUS_FEDERATED_AUDIENCE", "someone-else")
    cloud = recorded(call_timeout_s=20.0)
    with pytest.raises(Unauthenticated) as err:
        cloud.principal()
    assert len(exchanges(world)) == 1  # refused at once: not retried while waiting for a token
    message = str(err.value)
    assert "audience nebius-wire" in message and "federated credentials" in message
    assert ci.service_account_id in message
    assert exchanges(world)[0].code == "UNAUTHENTICATED"
    assert used_tokens(world) == []  # nothing else was called


@covers("principal")
def test_an_account_without_federated_credentials_for_the_issuer_is_refused(
    world: WireWorld, ci: Federation, recorded: Callable[..., Any]
) -> None:
    other = world.fake.add_service_account(PROJECT, "no-federation")
    world.monkeypatch.setenv("NPA_NEBIUS_SERVICE_ACCOUNT_ID", other)
    with pytest.raises(Unauthenticated) as err:
        recorded().principal()
    assert f"no federated credentials of {other} trust issuer" in str(err.value)


@covers("principal")
def test_a_pull_request_token_cannot_act_as_the_deploy_account(
    world: WireWorld, recorded: Callable[..., Any]
) -> None:
    deploy_only = "repo:wire-org/fleet:environment:fleet-production"
    with federation(world, PROJECT, trusted_subject=deploy_only), pytest.raises(PermissionDenied) as err:
        recorded().principal()
    assert "may not act as" in str(err.value)


@covers("principal")
def test_an_expired_oidc_token_from_github_is_not_sent(
    world: WireWorld, ci: Federation, recorded: Callable[..., Any]
) -> None:
    ci.github.life_s = -60  # the runner's clock says it has already expired
    with pytest.raises(Unauthenticated) as err:
        recorded().principal()
    assert "expired at" in str(err.value) and "GitHub Actions" in str(err.value)
    assert exchanges(world) == []


@covers("principal")
def test_github_refusing_the_job_is_a_clear_error(
    world: WireWorld, ci: Federation, recorded: Callable[..., Any]
) -> None:
    ci.github.status = 403
    with pytest.raises(Unauthenticated) as err:
        recorded().principal()
    assert "HTTP 403" in str(err.value) and "id-token: write" in str(err.value)


@covers("principal", "access_token")
def test_a_token_file_is_re_read_for_every_exchange(
    world: WireWorld, ci: Federation, recorded: Callable[..., Any], tmp_path: Path
) -> None:
    token_file = tmp_path / "oidc.jwt"
    token_file.write_text(ci.issuer.mint(ci.github.subject, "nebius-wire") + "\n")
    world.monkeypatch.setenv("NPA_NEBIUS_FEDERATED_TOKEN_FILE", str(token_file))
    world.monkeypatch.setenv("NPA_NEBIUS_FEDERATED_AUDIENCE", "nebius-wire")
    cloud = recorded()
    assert cloud.principal().subject == ci.service_account_id
    rewritten = ci.issuer.mint(ci.github.subject, "nebius-wire")
    token_file.write_text(rewritten)
    cloud.access_token()
    assert [c.request.actor_token for c in exchanges(world)][-1] == rewritten
    assert ci.github.issued == []  # the file wins over GitHub's endpoint


@covers("principal", "access_token")
def test_a_cli_profile_with_federated_credentials_works_through_the_sdk(
    world: WireWorld, ci: Federation, tmp_path: Path
) -> None:
    # The other way to configure it: a Nebius CLI profile of a service account whose credentials are a
    # federated token file (the SDK's own profile reader builds the same federated-credentials bearer).
    token_file = tmp_path / "oidc.jwt"
    token_file.write_text(ci.issuer.mint(ci.github.subject, "nebius-wire"))
    profile = {
        "endpoint": "api.nebius.cloud",
        "tenant-id": TENANT,
        "auth-type": "service account",
        "service-account-id": ci.service_account_id,
        "federated-subject-credentials-file-path": str(token_file),
    }
    world.write_config({"wire": world.profile("unused", TENANT, "wire"), "ci": profile}, default="wire")
    cloud = RecordingCloud(world.cloud(profile="ci"))
    assert cloud.principal().subject == ci.service_account_id
    minted = cloud.access_token().get_secret_value()
    assert world.fake.tokens[minted].via == "federated"
    actors = {c.request.actor_token for c in exchanges(world)}
    assert actors == {token_file.read_text()}  # the file's token, read for each exchange
    assert cloud.called == {"principal", "access_token"}


def test_an_expired_token_file_is_bad_input_before_any_call(
    world: WireWorld, ci: Federation, tmp_path: Path
) -> None:
    token_file = tmp_path / "oidc.jwt"
    token_file.write_text(ci.issuer.mint(ci.github.subject, "x", issued=time.time() - 3600))
    world.monkeypatch.setenv("NPA_NEBIUS_FEDERATED_TOKEN_FILE", str(token_file))
    with pytest.raises(ProfileError) as err:
        world.cloud(auth="federated")
    assert "expired at" in str(err.value) and str(token_file) in str(err.value)
    assert err.value.exit_code == 2
    assert world.fake.calls == []


def test_a_token_file_for_another_audience_is_bad_input(
    world: WireWorld, ci: Federation, tmp_path: Path
) -> None:
    token_file = tmp_path / "oidc.jwt"
    token_file.write_text(ci.issuer.mint(ci.github.subject, "someone-else"))
    world.monkeypatch.setenv("NPA_NEBIUS_FEDERATED_TOKEN_FILE", str(token_file))
    world.monkeypatch.setenv("NPA_NEBIUS_FEDERATED_AUDIENCE", "nebius-wire")
    with pytest.raises(ProfileError, match="audience someone-else, not 'nebius-wire'"):
        world.cloud(auth="federated")
    assert world.fake.calls == []


def test_federated_auth_without_an_account_or_a_token_source_is_bad_input(
    world: WireWorld, ci: Federation
) -> None:
    world.monkeypatch.delenv("NPA_NEBIUS_SERVICE_ACCOUNT_ID")
    with pytest.raises(ProfileError, match="NPA_NEBIUS_SERVICE_ACCOUNT_ID"):
        world.cloud(auth="federated")
    world.monkeypatch.setenv("NPA_NEBIUS_SERVICE_ACCOUNT_ID", ci.service_account_id)
    world.monkeypatch.delenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
    with pytest.raises(ProfileError, match="ACTIONS_ID_TOKEN_REQUEST_TOKEN is not set"):
        world.cloud(auth="federated")
    world.monkeypatch.delenv("ACTIONS_ID_TOKEN_REQUEST_URL")
    with pytest.raises(ProfileError, match="no OIDC token to exchange"):
        world.cloud(auth="federated")
    assert world.fake.calls == []


@covers("principal", "access_token")
def test_no_token_reaches_a_log_a_repr_or_an_error(
    world: WireWorld, ci: Federation, recorded: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    world.fake.exchanged_token_life_s = 2
    cloud = recorded()
    cloud.principal()
    time.sleep(2.2)  # a background renewal, logged at debug by the SDK
    minted = cloud.access_token()
    world.fake.federated_audience = "nebius-wire"  # from now on GitHub's default audience is refused
    with pytest.raises(Unauthenticated) as err:
        cloud.access_token()

    secrets = [REQUEST_TOKEN, *ci.github.issued, *world.fake.tokens]
    assert len(ci.github.issued) >= 3 and "token" in caplog.text.lower()  # the log was really captured
    texts = [
        caplog.text,
        repr(cloud.inner),
        repr(cloud.inner.identity),
        repr(cloud.inner.settings),
        repr(minted),
        str(err.value),
        repr(err.value),
        repr(err.value.request),
        str(err.value.__cause__),
        str(err.value.__context__),
    ]
    for text in texts:
        for secret in secrets:
            assert secret not in text


# ------------------------------------------------------------------------------------------ the CLI


@dataclass
class Cli:
    world: WireWorld
    ci: Federation
    tmp: Path
    backend: str
    passphrase: Path

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "npa_pulumi.cli.main", *args],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            timeout=timeout,
            cwd=REPO,
            check=False,
        )

    def fleet(self, command: str, *extra: str) -> subprocess.CompletedProcess[str]:
        spec = self.tmp / "fleet.yaml"
        spec.write_text(SPEC, encoding="utf-8")
        return self.run(
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
            self.backend,
            "--passphrase-file",
            str(self.passphrase),
            "--output",
            "json",
            *extra,
        )

    def seed_project_stack(self, outputs: dict[str, Any]) -> None:
        """The fleet's project stack, holding only the outputs a deployed one has."""
        from npa_pulumi.engine.automation.workspace import EngineSettings, select_or_create_stack

        def program() -> None:
            import pulumi

            for key, value in outputs.items():
                pulumi.export(key, value)

        settings = EngineSettings.resolve(self.backend, self.passphrase)
        stack = select_or_create_stack(settings, f"keyless.{PROJECT}", program)
        stack.up(on_output=lambda _line: None)

    def secrets(self) -> list[str]:
        """Everything that must never be written down: GitHub's request token, every OIDC token it issued
        and every token the exchange minted."""
        minted = [t for t, info in self.world.fake.tokens.items() if info.via == "federated"]
        return [REQUEST_TOKEN, *self.ci.github.issued, *minted]

    def assert_nothing_leaked(self, result: subprocess.CompletedProcess[str]) -> None:
        written = [result.stdout, result.stderr]
        for root in (self.world.home / ".npa-pulumi", Path(self.backend.removeprefix("file://"))):
            for path in root.rglob("*") if root.exists() else []:
                if path.is_file():
                    written.append(path.read_bytes().decode("utf-8", "replace"))
        assert len(written) > 2  # logs, work dirs and the state were really read
        for text in written:
            for secret in self.secrets():
                assert secret not in text


@pytest.fixture
def cli(isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    with wire_world(tmp_path, monkeypatch) as wire, federation(wire, PROJECT) as ci:
        assert wire.home == isolated_home
        state = tmp_path / "state"
        state.mkdir()
        passphrase = tmp_path / "passphrase"
        passphrase.write_text("wire-test-passphrase\n", encoding="utf-8")
        passphrase.chmod(0o600)
        yield Cli(wire, ci, tmp_path, f"file://{state}", passphrase)


def test_a_preview_authenticates_by_federated_exchange_and_renews_its_token(cli: Cli) -> None:
    # The project stack is deployed (its outputs), so the cluster's preview runs Terraform's own plan:
    # the bridge's token path, one renewed token per terraform invocation.
    cli.seed_project_stack({"project_id": PROJECT, "subnet_id": "vpcsubnet-e00wire"})
    result = cli.fleet("preview", "--no-preflight")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    document = json.loads(result.stdout)
    assert document["ok"] is True and document["cloud"] == "nebius"
    (cluster,) = document["clusters"]
    assert cluster["terraform"]["add"] > 0, cluster["terraform"]  # the offline recipe's plan really ran

    fake = cli.world.fake
    calls = [c for c in fake.calls if not c.method.endswith(EXCHANGE)]
    assert calls and all(c.code == "OK" for c in calls), [(c.method, c.code) for c in calls if c.code != "OK"]
    # Every call was made as the service account, with a token the exchange minted (never the profile's
    # token-file token that ~/.nebius/config.yaml also offers: federated auth reads no CLI profile).
    used = {bearer(c) for c in calls}
    assert all(fake.tokens[t].via == "federated" for t in used)
    assert {fake.tokens[t].subject for t in used} == {cli.ci.service_account_id}

    exchanged = exchanges(cli.world)
    assert all(c.code == "OK" for c in exchanged)
    # Renewal through the SDK's provider: on one connection (one adapter, one process) the bearer exchanged
    # again for every terraform invocation (init with the first token; plan and show each a renewed one).
    per_connection: dict[str, int] = {}
    for call in exchanged:
        per_connection[call.peer] = per_connection.get(call.peer, 0) + 1
    assert max(per_connection.values()) >= 3, per_connection
    # Each exchange sent an OIDC token of its own, fresh from GitHub's endpoint.
    actors = [c.request.actor_token for c in exchanged]
    assert len(set(actors)) == len(actors) and set(actors) <= set(cli.ci.github.issued)
    cli.assert_nothing_leaked(result)


def test_a_refused_exchange_fails_the_command_with_exit_1_and_no_traceback(cli: Cli) -> None:
    cli.world.fake.federated_audience = "nebius-wire"  # GitHub's default audience is not accepted
    result = cli.fleet("preview", "--no-preflight")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    error = json.loads(result.stdout)["error"]["message"]
    assert "token exchange refused" in error and "audience nebius-wire" in error
    assert "Traceback" not in result.stderr
    assert [c.code for c in exchanges(cli.world)][:1] == ["UNAUTHENTICATED"]
    assert [c for c in cli.world.fake.calls if not c.method.endswith(EXCHANGE)] == []
    cli.assert_nothing_leaked(result)


def test_an_expired_token_file_is_invalid_input_exit_2_before_any_call(cli: Cli) -> None:
    token_file = cli.tmp / "oidc.jwt"
    token_file.write_text(cli.ci.issuer.mint(cli.ci.github.subject, "x", issued=time.time() - 3600))
    cli.world.monkeypatch.setenv("NPA_NEBIUS_FEDERATED_TOKEN_FILE", str(token_file))
    result = cli.fleet("preview", "--no-preflight")
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    error = json.loads(result.stdout)["error"]["message"]
    assert "expired at" in error and str(token_file) in error and "Traceback" not in result.stderr
    assert cli.world.fake.calls == []


def test_doctor_checks_the_federated_path(cli: Cli) -> None:
    result = cli.run("doctor", "--cloud", "nebius", "--auth", "federated", "--output", "json")
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    federated = checks["nebius-federated"]
    assert federated["status"] == "ok", federated
    assert federated["details"]["tenant_id"] == TENANT
    assert cli.ci.service_account_id in federated["summary"] and "exchanged" in federated["summary"]
    assert exchanges(cli.world) and "nebius-profile" not in checks

    cli.ci.github.status = 403
    refused = cli.run("doctor", "--cloud", "nebius", "--auth", "federated", "--output", "json")
    federated = {c["name"]: c for c in json.loads(refused.stdout)["checks"]}["nebius-federated"]
    assert refused.returncode == 1 and federated["status"] == "fail"
    assert "HTTP 403" in federated["summary"] and "backend init --ci-repository" in federated["fix"]
    for text in (result.stdout, result.stderr, refused.stdout, refused.stderr):
        for secret in cli.secrets():
            assert secret not in text
