"""Keyless CI's pure parts: the OIDC token checks, where the token comes from, the settings and identity of
`--auth federated`, Terraform's token path under it, and what `backend init --ci-repository` prints."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import hcl2
import jwt
import pytest
from click.testing import CliRunner
from pydantic import SecretStr

from npa_pulumi.bridge.credentials import terraform_auth
from npa_pulumi.bridge.terraform import TerraformWorkspace, base_env
from npa_pulumi.cli.main import cli
from npa_pulumi.cloud.nebius.federated import (
    GithubActions,
    OidcTokenError,
    TokenFile,
    check_token,
    oidc_source,
)
from npa_pulumi.cloud.nebius.profile import ProfileError, resolve_identity
from npa_pulumi.cloud.nebius.settings import AuthMode, NebiusSettings
from npa_pulumi.engine.ci_identity import GITHUB_ISSUER, ci_identity
from npa_pulumi.errors import UserInputError
from npa_pulumi.runtime.daemons import daemon_env

ACCOUNT = "serviceaccount-e00ci"


def token(aud: str | list[str] = "nebius", exp: float | None = None) -> str:
    now = time.time()
    claims = {"iss": GITHUB_ISSUER, "sub": "repo:o/r:pull_request", "aud": aud, "iat": int(now)}
    claims["exp"] = int(now + 300 if exp is None else exp)
    return jwt.encode(claims, "k" * 32, algorithm="HS256")


# ------------------------------------------------------------------------------------------ the token


def test_a_fresh_token_for_the_audience_passes() -> None:
    check_token(token("nebius"), "src", "nebius")
    check_token(token(["a", "nebius"]), "src", "nebius")
    check_token(token("anything"), "src", None)  # no audience configured: not checked


def test_an_expired_token_is_refused_naming_the_source_never_the_token() -> None:
    stale = token(exp=time.time() - 5)
    with pytest.raises(OidcTokenError) as err:
        check_token(stale, "token file /ci/oidc", None)
    assert "expired at" in str(err.value) and "token file /ci/oidc" in str(err.value)
    assert stale not in str(err.value)
    with pytest.raises(OidcTokenError, match="expired"):  # about to expire is as good as expired
        check_token(token(exp=time.time() + 3), "src", None)


def test_a_token_for_another_audience_or_not_a_jwt_is_refused() -> None:
    with pytest.raises(OidcTokenError, match="audience other, not 'nebius'"):
        check_token(token("other"), "src", "nebius")
    with pytest.raises(OidcTokenError, match="does not hold a JWT"):
        check_token("not-a-token", "src", None)


def test_a_token_file_is_read_stripped_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "oidc"
    fresh = token("nebius")
    path.write_text(fresh + "\n")
    assert TokenFile(path, "nebius").fetch() == fresh
    path.write_text("")
    with pytest.raises(OidcTokenError, match="is empty"):
        TokenFile(path).fetch()
    with pytest.raises(OidcTokenError, match="does not exist"):
        TokenFile(tmp_path / "missing").fetch()


def test_github_is_asked_for_the_configured_audience_only() -> None:
    url = "https://pipelines.example/token?api-version=2.0"
    assert GithubActions(url, SecretStr("t")).url() == url
    assert GithubActions(url, SecretStr("t"), "nebius aud").url() == f"{url}&audience=nebius+aud"
    assert GithubActions("https://x/token", SecretStr("t"), "a").url() == "https://x/token?audience=a"
    assert "secret-request-token" not in repr(GithubActions(url, SecretStr("secret-request-token")))


def _settings(**options: object) -> NebiusSettings:
    return NebiusSettings.from_options({"auth": "federated", **options}, env={})


def test_the_token_file_wins_over_github(tmp_path: Path) -> None:
    github = {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://x/t", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "r"}
    assert isinstance(oidc_source(_settings(), github), GithubActions)
    assert isinstance(oidc_source(_settings(federated_token_file=tmp_path / "f"), github), TokenFile)
    with pytest.raises(OidcTokenError, match="ACTIONS_ID_TOKEN_REQUEST_TOKEN is not set"):
        oidc_source(_settings(), {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://x/t"})
    with pytest.raises(OidcTokenError, match="no OIDC token to exchange"):
        oidc_source(_settings(), {})
    with pytest.raises(OidcTokenError, match="must be an absolute path"):
        oidc_source(_settings(federated_token_file="ci/oidc.jwt"), github)


# ------------------------------------------------------------------------------------------ settings


def test_the_environment_turns_federated_auth_on() -> None:
    env = {
        "NPA_NEBIUS_AUTH": "Federated",
        "NPA_NEBIUS_SERVICE_ACCOUNT_ID": ACCOUNT,
        "NPA_NEBIUS_FEDERATED_AUDIENCE": "nebius",
        "NPA_NEBIUS_FEDERATED_TOKEN_FILE": "/ci/oidc",
    }
    settings = NebiusSettings.from_options({}, env=env)
    assert settings.auth is AuthMode.FEDERATED
    assert (settings.service_account_id, settings.federated_audience) == (ACCOUNT, "nebius")
    assert settings.federated_token_file == Path("/ci/oidc")
    assert NebiusSettings.from_options({"auth": "auto"}, env=env).auth is AuthMode.AUTO  # a flag wins
    assert NebiusSettings.from_options({}, env={}).auth is AuthMode.AUTO


def test_an_unknown_auth_mode_is_bad_input() -> None:
    with pytest.raises(UserInputError, match="expected one of auto, federated"):
        NebiusSettings.from_options({}, env={"NPA_NEBIUS_AUTH": "oidc"})


def test_the_federated_identity_needs_an_account_and_names_its_source(tmp_path: Path) -> None:
    github = {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://x/t", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "r"}
    with pytest.raises(ProfileError, match="NPA_NEBIUS_SERVICE_ACCOUNT_ID") as err:
        resolve_identity(_settings(), github)
    assert err.value.exit_code == 2
    identity = resolve_identity(_settings(service_account_id=ACCOUNT, tenant_id="tenant-e00a"), github)
    assert (identity.kind, identity.profile, identity.tenant_id) == ("federated", "", "tenant-e00a")
    assert identity.describe() == f"federated credentials of {ACCOUNT} (GitHub Actions' OIDC token endpoint)"
    assert identity.config_file is None  # no CLI configuration is read
    with pytest.raises(ProfileError, match="exclude each other"):
        resolve_identity(_settings(service_account_id=ACCOUNT, credentials_file=tmp_path / "sa.json"), github)


# ------------------------------------------------------------------------------------------ Terraform


def test_federated_auth_takes_terraform_s_token_path_even_for_the_default_recipe() -> None:
    auth = terraform_auth("nebius", "default", "ci", {"NPA_NEBIUS_AUTH": "federated"})
    assert auth.mode == "token" and auth.env() == {} and "federated" in auth.reason


def test_terraform_never_gets_the_means_to_mint_the_job_s_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "request-token")
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", "https://pipelines.example/token")
    env = base_env()
    assert "ACTIONS_ID_TOKEN_REQUEST_TOKEN" not in env and "ACTIONS_ID_TOKEN_REQUEST_URL" not in env
    assert not any(k.startswith("ACTIONS_ID_TOKEN_REQUEST_") for k in daemon_env())


class _Recorded(TerraformWorkspace):
    def _run_untraced(self, args: list[str], env: Mapping[str, str], what: str) -> str:
        self.runs = [*getattr(self, "runs", []), dict(env)]
        return ""


def test_every_token_path_invocation_gets_a_renewed_token(tmp_path: Path) -> None:
    minted = iter(["tok-2", "tok-3"])
    workspace = _Recorded(root=tmp_path, redact=("tok-1",))
    workspace.renew_token = lambda: next(minted)
    env = {"TF_VAR_iam_token": "tok-1", "NEBIUS_IAM_TOKEN": "tok-1", "TF_VAR_region": "eu-north1"}
    workspace._run(["plan"], env, "plan")
    workspace._run(["apply"], env, "apply")
    assert [(r["TF_VAR_iam_token"], r["NEBIUS_IAM_TOKEN"]) for r in workspace.runs] == [
        ("tok-2", "tok-2"),
        ("tok-3", "tok-3"),
    ]
    assert set(workspace.redact) == {"tok-1", "tok-2", "tok-3"}  # each one masked in terraform.log
    profile_run = {"TF_VAR_npa_nebius_profile": "ci"}
    workspace._run(["plan"], profile_run, "plan")  # no token in the run: nothing to renew
    assert workspace.runs[-1] == profile_run


# ------------------------------------------------------------------------------------------ backend init


def test_ci_identity_trusts_pull_requests_to_read_and_the_environment_to_deploy() -> None:
    ci = ci_identity("acme/gpu-fleet", "prod")
    preview, deploy = ci.accounts
    assert (preview.subject, preview.group) == ("repo:acme/gpu-fleet:pull_request", "viewers")
    assert (deploy.subject, deploy.group) == ("repo:acme/gpu-fleet:environment:prod", "editors")
    assert preview.name == "npa-ci-preview-gpu-fleet" and ci.issuer == GITHUB_ISSUER
    blocks = _resources(ci.terraform())
    assert ("nebius_iam_v1_federated_credentials", "npa_ci_preview") in blocks
    assert ("nebius_iam_v1_group_membership", "npa_ci_deploy") in blocks
    credentials = blocks[("nebius_iam_v1_federated_credentials", "npa_ci_deploy")]
    assert credentials["federated_subject_id"] == '"repo:acme/gpu-fleet:environment:prod"'
    assert credentials["oidc_provider"]["issuer_url"] == f'"{GITHUB_ISSUER}"'
    assert credentials["subject_id"] == "${nebius_iam_v1_service_account.npa_ci_deploy.id}"
    assert credentials["parent_id"] == "${var.deploy_project_id}"


def test_each_ci_account_may_mint_keys_for_itself_and_use_the_state_bucket_only() -> None:
    ci = ci_identity("acme/gpu-fleet", "prod")
    parsed = hcl2.loads(ci.terraform())
    variables = {name.strip('"') for block in parsed["variable"] for name in block}
    assert variables == {"tenant_id", "preview_project_id", "deploy_project_id", "state_bucket_id"}
    blocks = _resources(ci.terraform())
    for role in ("preview", "deploy"):
        key = f"npa_ci_{role}"
        # Each account lives alone in a project of its own: an access key's parent is the project.
        assert blocks[("nebius_iam_v1_service_account", key)]["parent_id"] == f"${{var.{role}_project_id}}"
        group = blocks[("nebius_iam_v1_group", f"{key}_keys")]
        assert group["parent_id"] == "${var.tenant_id}" and group["name"] == f'"npa-ci-{role}-gpu-fleet-keys"'
        member = blocks[("nebius_iam_v1_group_membership", f"{key}_keys")]
        assert member["parent_id"] == f"${{nebius_iam_v1_group.{key}_keys.id}}"
        assert member["member_id"] == f"${{nebius_iam_v1_service_account.{key}.id}}"
        own = blocks[("nebius_iam_v1_access_permit", f"{key}_own_keys")]
        assert (own["resource_id"], own["role"]) == (f"${{var.{role}_project_id}}", '"admin"')
        state = blocks[("nebius_iam_v1_access_permit", f"{key}_state")]
        assert (state["resource_id"], state["role"]) == ("${var.state_bucket_id}", '"storage.object-editor"')
        assert own["parent_id"] == state["parent_id"] == f"${{nebius_iam_v1_group.{key}_keys.id}}"
    # Nothing grants admin wider than an account's own project.
    admins = [
        b
        for (kind, _), b in blocks.items()
        if kind == "nebius_iam_v1_access_permit" and b["role"] == '"admin"'
    ]
    assert sorted(b["resource_id"] for b in admins) == [
        "${var.deploy_project_id}",
        "${var.preview_project_id}",
    ]


def _resources(text: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(type, name) -> body of every resource block, as python-hcl2 parses the text (labels unquoted)."""
    parsed = hcl2.loads(text)
    return {
        (kind.strip('"'), name.strip('"')): body
        for block in parsed["resource"]
        for kind, named in block.items()
        for name, body in named.items()
    }


@pytest.mark.parametrize("repository", ["acme", "acme/", "/fleet", "acme/fleet/x", "ac me/fleet", ""])
def test_a_repository_that_is_not_owner_slash_repo_is_refused(repository: str) -> None:
    with pytest.raises(UserInputError, match="OWNER/REPO"):
        ci_identity(repository)


def test_backend_init_refuses_ci_flags_before_touching_a_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    runner = CliRunner()
    local = runner.invoke(cli, ["backend", "init", "--bucket", "state", "--ci-repository", "acme/fleet"])
    assert local.exit_code == 2 and "need --cloud nebius" in local.output
    bad = runner.invoke(
        cli, ["backend", "init", "--cloud", "nebius", "--bucket", "state", "--ci-repository", "acme"]
    )
    # The repository is refused, not the missing storage key: nothing was attempted.
    assert bad.exit_code == 2 and "OWNER/REPO" in bad.output and "AWS_ACCESS_KEY_ID" not in bad.output
