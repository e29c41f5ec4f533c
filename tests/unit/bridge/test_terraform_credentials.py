"""Credentials that outlive a long apply (npa_pulumi/bridge/credentials.py): with a profile, the default
recipe's terraform authenticates through the profile, so the bridge builds an environment with no
`TF_VAR_iam_token` and no `NEBIUS_IAM_TOKEN` (and never mints one); other recipes keep the token path, with
a warning when the run may outlive the token; `NPA_REUSE_IAM_TOKEN` keeps its meaning."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from upstream_library import upstream_library, writable_copy

from npa_pulumi.bridge.credentials import terraform_auth, token_life_warning
from npa_pulumi.bridge.terraform import TerraformWorkspace, runtime_env
from npa_pulumi.components import terraform_module

V4 = upstream_library()
IDENTITY = {
    "tenant_id": "tenant-e00a",
    "parent_id": "project-e00a",
    "region": "us-central1",
    "subnet_id": "vpcsubnet-e00a",
}


def test_the_default_recipe_with_a_profile_authenticates_through_it() -> None:
    auth = terraform_auth("nebius", "default", "ci", {})
    assert auth.mode == "profile"
    assert auth.env() == {"TF_VAR_npa_nebius_profile": "ci", "NEBIUS_PROFILE": "ci"}
    assert terraform_auth("nebius", "default", "", {}).env() == {"TF_VAR_npa_nebius_profile": ""}


@pytest.mark.parametrize(
    ("cloud", "kind", "environ"),
    [
        ("nebius", "dir", {}),
        ("nebius", "git", {}),
        ("local", "default", {}),  # the local cloud's providers take the token it issues
        ("local", "local-stand-in", {}),  # soperator's stand-in
        ("nebius", "default", {"NPA_REUSE_IAM_TOKEN": "1"}),  # the ambient token decides, as everywhere
        ("nebius", "default", {"NPA_NEBIUS_CREDENTIALS_FILE": "/sa.json"}),
    ],
)
def test_the_token_path_stays_for_everything_else(cloud: str, kind: str, environ: Mapping[str, str]) -> None:
    auth = terraform_auth(cloud, kind, "ci", environ)
    assert auth.mode == "token" and auth.env() == {}


def test_a_run_that_may_outlive_its_token_is_warned_about() -> None:
    assert token_life_warning({}) is None
    warning = token_life_warning({"NPA_IAM_TOKEN_LIFETIME_S": "3600", "NPA_EXPECTED_TERRAFORM_RUN_S": "7200"})
    assert warning is not None and "60 min" in warning and "120 min" in warning


def test_runtime_env_without_a_token_carries_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", "ambient-token")
    monkeypatch.delenv("NPA_REUSE_IAM_TOKEN", raising=False)
    env = runtime_env(IDENTITY, {}, None, terraform_auth("nebius", "default", "ci", {}).env())
    assert "TF_VAR_iam_token" not in env and "NEBIUS_IAM_TOKEN" not in env
    assert env["TF_VAR_npa_nebius_profile"] == "ci" and env["TF_VAR_parent_id"] == "project-e00a"


class _NoInit(TerraformWorkspace):
    def init(
        self, env: Mapping[str, str], plugin_cache_lock: Path | None = None, recipe_digest: str | None = None
    ) -> None:
        self.seen_env = dict(env)  # the environment terraform would run with; no providers offline


def test_prepare_builds_a_token_free_environment_for_the_default_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "npa"))
    monkeypatch.delenv("NPA_K8S_TRAINING_MIRROR", raising=False)  # the git fetch path, not the mirror
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", "ambient-token")
    for name in ("NPA_REUSE_IAM_TOKEN", "NPA_NEBIUS_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    upstream = writable_copy(tmp_path / "upstream")
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "v4"]):
        subprocess.run(["git", "-C", str(upstream), *args], check=True, env={**env, "PATH": "/usr/bin:/bin"})
    sha = subprocess.run(
        ["git", "-C", str(upstream), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    props = {
        "cloud": "nebius",
        "profile": "ci",
        "fleet": "f",
        "project_key": "p",
        "cluster": "c",
        "work_key": "f.p.c",
        "identity": IDENTITY,
        "tfvars": {"cluster_name": "c"},
        "recipe": {"source": "default", "location": f"file://{upstream}@{sha}", "digest": ""},
    }
    workspace = _NoInit(root=tmp_path / "work")
    _, built = terraform_module._prepare(props, None, same_recipe=False, workspace=workspace)
    assert "TF_VAR_iam_token" not in built and "NEBIUS_IAM_TOKEN" not in built
    assert built["TF_VAR_npa_nebius_profile"] == "ci" and built["NEBIUS_PROFILE"] == "ci"
    assert workspace.seen_env == built
    assert (workspace.module_dir / "npa_fleet_auth_override.tf").is_file()


def test_a_stack_recorded_with_the_removed_k8s_stand_in_is_refused_before_its_work_dir_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "npa"))
    props = {
        "cloud": "local",
        "fleet": "f",
        "project_key": "p",
        "cluster": "c",
        "work_key": "f.p.c",
        "identity": IDENTITY,
        "tfvars": {"cluster_name": "c"},
        "recipe": {"source": "local-stand-in", "location": "recipes/local-k8s-training", "digest": "d"},
    }
    workspace = _NoInit(root=tmp_path / "work")
    with pytest.raises(
        RuntimeError, match=r"k8s-training stand-in recipe \(recipes/local-k8s-training\)"
    ) as err:
        terraform_module._prepare(props, None, same_recipe=False, workspace=workspace)
    assert "local-cloud reset" in str(err.value)
    assert not (tmp_path / "work").exists()
