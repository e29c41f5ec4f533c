"""`doctor --cloud nebius --output json` against the loopback fake, for each auth path it can find (issue
60): a CLI profile, a token in the environment, a service account's key file, and federated credentials.
Each names the path, the identity (a user or a service account, and its tenant), a fresh token's lifetime
and how it is renewed, and whether that identity can read the fleet's projects (the spec's with --spec,
else the tenant's list); no token is ever printed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from wire.fleet import EXISTING_PROJECT, KEYLESS_SPEC
from wire.world import OTHER_TENANT, TENANT, TOKEN, WireWorld, federation, wire_world

from npa_pulumi.cli.main import cli

pytestmark = pytest.mark.integration

AMBIENT_TOKEN = "wire-ambient-token-for-doctor"
LIFE_S = 3600  # the fake's exchanged tokens' expires_in (FakeNebius.exchanged_token_life_s)


@pytest.fixture
def world(isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WireWorld]:
    with wire_world(tmp_path, monkeypatch) as wire:
        assert wire.home == isolated_home
        yield wire


def doctor(*args: str, secrets: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """The nebius checks of `doctor --cloud nebius --output json` (the machine's toolchain checks aside)."""
    result = CliRunner().invoke(cli, ["doctor", "--cloud", "nebius", *args, "--output", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    for secret in secrets:
        assert secret not in result.output
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    return {name: check for name, check in checks.items() if name.startswith("nebius-")}


def _lifetime_is_the_exchanges(token: dict[str, Any]) -> None:
    assert token["expires_at"] is not None and 0 < token["lifetime_s"] <= LIFE_S


def test_a_cli_profile_is_named_with_its_user_its_tenant_and_its_token_file(world: WireWorld) -> None:
    checks = doctor(secrets=(TOKEN,))
    found = checks["nebius-profile"]
    assert found["status"] == "ok", found
    details = found["details"]
    assert details["auth_path"] == "cli-profile" and "profile 'wire'" in details["auth"]
    assert details["principal"] == {"kind": "user", "id": "useraccount-e00wire", "tenant_id": TENANT}
    # A token read from a file carries no expiry of its own: renewed by whatever writes the file.
    assert details["token"]["expires_at"] is None and "token-file" in details["token"]["refresh"]
    assert "user useraccount-e00wire of tenant " + TENANT in found["summary"]
    projects = checks["nebius-projects"]
    assert projects["status"] == "ok" and projects["details"]["listed"] == 1, projects


def test_a_token_in_the_environment_is_the_path_when_its_reuse_is_opted_in(
    world: WireWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.fake.add_token(AMBIENT_TOKEN, "useraccount-e00ambient", {TENANT})
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", AMBIENT_TOKEN)
    assert doctor()["nebius-profile"]["details"]["auth_path"] == "cli-profile"  # ignored unless opted in
    monkeypatch.setenv("NPA_REUSE_IAM_TOKEN", "1")
    checks = doctor(secrets=(AMBIENT_TOKEN, TOKEN))
    details = checks["nebius-profile"]["details"]
    assert details["auth_path"] == "environment-token" and "over profile 'wire'" in details["auth"]
    assert details["principal"]["id"] == "useraccount-e00ambient"
    assert "export a fresh one" in details["token"]["refresh"]
    assert checks["nebius-projects"]["status"] == "ok"


def test_a_service_account_key_file_acts_as_the_account_with_an_exchanged_token(
    world: WireWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    credentials = world.service_account_credentials(EXISTING_PROJECT)
    monkeypatch.setenv("NPA_NEBIUS_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("NPA_TENANT_ID", TENANT)
    minted_before = set(world.fake.tokens)
    checks = doctor()
    found = checks["nebius-profile"]
    assert found["status"] == "ok", found
    details = found["details"]
    assert details["auth_path"] == "service-account-key-file" and str(credentials) in details["auth"]
    principal = details["principal"]
    assert principal["kind"] == "service-account" and principal["id"].startswith("serviceaccount-")
    assert principal["tenant_id"] == TENANT and principal["project_id"] == EXISTING_PROJECT
    _lifetime_is_the_exchanges(details["token"])
    assert "JWT signed with the service account's key" in details["token"]["refresh"]
    minted = set(world.fake.tokens) - minted_before
    assert minted and not any(token in json.dumps(checks) for token in minted)


def test_federated_credentials_name_the_account_and_the_exchange(world: WireWorld) -> None:
    with federation(world, EXISTING_PROJECT) as ci:
        checks = doctor("--auth", "federated", secrets=tuple(ci.github.issued))
    found = checks["nebius-federated"]
    assert found["status"] == "ok", found
    details = found["details"]
    assert details["auth_path"] == "federated-credentials" and ci.service_account_id in details["auth"]
    assert details["principal"]["kind"] == "service-account"
    assert details["principal"]["id"] == ci.service_account_id and details["tenant_id"] == TENANT
    _lifetime_is_the_exchanges(details["token"])
    assert "fresh OIDC token" in details["token"]["refresh"]
    assert "nebius-profile" not in checks and checks["nebius-projects"]["status"] == "ok"


def test_the_fleets_projects_are_read_by_id_and_one_of_another_tenant_fails(
    world: WireWorld, tmp_path: Path
) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(KEYLESS_SPEC, encoding="utf-8")
    readable = doctor("--spec", str(spec))["nebius-projects"]
    assert readable["status"] == "ok" and readable["details"]["readable"] == {
        EXISTING_PROJECT: EXISTING_PROJECT
    }

    elsewhere = world.fake.add_project("theirs", "eu-north1", tenant_id=OTHER_TENANT)
    spec.write_text(KEYLESS_SPEC.replace(EXISTING_PROJECT, elsewhere), encoding="utf-8")
    refused = doctor("--spec", str(spec))["nebius-projects"]
    assert refused["status"] == "fail", refused
    assert elsewhere in refused["summary"] and "viewer role" in refused["fix"]
    assert list(refused["details"]["refused"]) == [elsewhere]
