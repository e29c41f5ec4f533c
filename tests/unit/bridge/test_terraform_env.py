"""What reaches Terraform (and so its provisioners) from the environment: an ambient NEBIUS_IAM_TOKEN
decides nothing unless NPA_REUSE_IAM_TOKEN says so, exactly as on the SDK path (cloud/nebius/profile.py)."""

from __future__ import annotations

import pytest

from npa_pulumi.bridge.terraform import runtime_env

IDENTITY = {"tenant_id": "tenant-x", "parent_id": "project-x", "region": "us-central1", "subnet_id": "s"}


def test_ambient_token_is_stripped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", "ambient-stale-token")
    monkeypatch.delenv("NPA_REUSE_IAM_TOKEN", raising=False)
    env = runtime_env({**IDENTITY, "iam_token": "minted-token"}, {}, None)
    assert "ambient-stale-token" not in env.values()
    # The provider authenticates as the fleet's identity: the token minted for this run.
    assert env["NEBIUS_IAM_TOKEN"] == "minted-token"
    assert env["TF_VAR_iam_token"] == "minted-token"


def test_ambient_token_is_stripped_without_a_minted_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", "ambient-stale-token")
    monkeypatch.setenv("NPA_REUSE_IAM_TOKEN", "0")
    env = runtime_env(IDENTITY, {}, None)
    assert "NEBIUS_IAM_TOKEN" not in env
    assert "ambient-stale-token" not in env.values()


@pytest.mark.parametrize("flag", ["1", "true", "yes"])
def test_reuse_flag_keeps_the_ambient_token(monkeypatch: pytest.MonkeyPatch, flag: str) -> None:
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", "ci-injected-token")
    monkeypatch.setenv("NPA_REUSE_IAM_TOKEN", flag)
    env = runtime_env(IDENTITY, {}, None)
    assert env["NEBIUS_IAM_TOKEN"] == "ci-injected-token"
