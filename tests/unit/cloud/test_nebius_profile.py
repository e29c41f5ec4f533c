"""Profile and tenant resolution of the `nebius` adapter (no network, no SDK)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from npa_pulumi.cloud.nebius.profile import (
    DISABLED_TOKEN_ENV,
    ProfileError,
    require_tenant,
    resolve_identity,
)
from npa_pulumi.cloud.nebius.settings import NebiusSettings


def config(tmp_path: Path, profiles: dict[str, dict[str, str]], default: str | None = None) -> Path:
    path = tmp_path / "config.yaml"
    body: dict[str, object] = {"profiles": profiles}
    if default:
        body["default"] = default
    path.write_text(yaml.safe_dump(body))
    return path


def settings(path: Path, **kw: object) -> NebiusSettings:
    return NebiusSettings(config_file=path, **kw)


PROFILES = {
    "a": {"tenant-id": "tenant-a", "endpoint": "api.nebius.cloud", "token-file": "/t"},
    "b": {"tenant-id": "tenant-b", "token-file": "/t"},
    "bare": {"token-file": "/t"},
}


def test_the_config_default_profile_is_used_when_none_is_given(tmp_path: Path) -> None:
    ident = resolve_identity(settings(config(tmp_path, PROFILES, "a")), env={})
    assert (ident.kind, ident.profile, ident.tenant_id, ident.explicit_profile) == (
        "profile",
        "a",
        "tenant-a",
        False,
    )
    assert ident.profile_endpoint == "api.nebius.cloud"


def test_an_explicit_profile_wins_over_env_and_default(tmp_path: Path) -> None:
    path = config(tmp_path, PROFILES, "a")
    assert resolve_identity(settings(path, profile="b"), env={"NEBIUS_PROFILE": "a"}).tenant_id == "tenant-b"
    assert resolve_identity(settings(path), env={"NEBIUS_PROFILE": "b"}).profile == "b"


def test_a_sole_profile_needs_no_default(tmp_path: Path) -> None:
    path = config(tmp_path, {"only": PROFILES["a"]})
    assert resolve_identity(settings(path), env={}).profile == "only"


def test_several_profiles_without_default_are_ambiguous(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="no default"):
        resolve_identity(settings(config(tmp_path, PROFILES)), env={})


def test_an_explicit_profile_without_tenant_is_a_hard_error(tmp_path: Path) -> None:
    path = config(tmp_path, PROFILES, "a")
    with pytest.raises(ProfileError, match="no tenant-id"):
        resolve_identity(settings(path, profile="bare"), env={})
    with pytest.raises(ProfileError, match="no tenant-id"):
        resolve_identity(settings(path), env={"NEBIUS_PROFILE": "bare"})


def test_a_default_profile_without_tenant_defers_to_the_api_or_the_spec(tmp_path: Path) -> None:
    path = config(tmp_path, PROFILES, "bare")
    ident = resolve_identity(settings(path), env={})
    assert ident.tenant_id == ""
    assert require_tenant(ident, ["tenant-x"]) == "tenant-x"
    with pytest.raises(ProfileError, match="several tenants"):
        require_tenant(ident, ["tenant-x", "tenant-y"])
    assert resolve_identity(settings(path, tenant_id="tenant-s"), env={}).tenant_id == "tenant-s"


def test_the_spec_tenant_must_agree_with_the_profile(tmp_path: Path) -> None:
    path = config(tmp_path, PROFILES, "a")
    assert resolve_identity(settings(path, tenant_id="tenant-a"), env={}).tenant_id == "tenant-a"
    with pytest.raises(ProfileError, match="belongs to tenant"):
        resolve_identity(settings(path, tenant_id="tenant-b"), env={})


def test_unknown_profile_and_missing_or_broken_config(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="not found"):
        resolve_identity(settings(config(tmp_path, PROFILES, "a"), profile="zzz"), env={})
    with pytest.raises(ProfileError, match="not found"):
        resolve_identity(settings(tmp_path / "absent.yaml"), env={})
    broken = tmp_path / "broken.yaml"
    broken.write_text("profiles: [unclosed")
    with pytest.raises(ProfileError, match="not valid YAML"):
        resolve_identity(settings(broken), env={})


def test_the_ambient_token_is_ignored_unless_reuse_is_asked_for(tmp_path: Path) -> None:
    path = config(tmp_path, PROFILES, "a")
    env = {"NEBIUS_IAM_TOKEN": "stale"}
    assert resolve_identity(settings(path), env=env).token_env == DISABLED_TOKEN_ENV
    assert resolve_identity(settings(path, reuse_iam_token=True), env=env).token_env == "NEBIUS_IAM_TOKEN"


def test_reuse_flag_comes_from_the_environment() -> None:
    assert NebiusSettings.from_options({}, env={"NPA_REUSE_IAM_TOKEN": "1"}).reuse_iam_token
    assert not NebiusSettings.from_options({}, env={"NPA_REUSE_IAM_TOKEN": "0"}).reuse_iam_token


def test_ci_token_without_any_config(tmp_path: Path) -> None:
    s = settings(tmp_path / "absent.yaml", reuse_iam_token=True, tenant_id="tenant-ci")
    ident = resolve_identity(s, env={"NEBIUS_IAM_TOKEN": "short-lived"})
    assert (ident.kind, ident.tenant_id, ident.token_env) == ("env-token", "tenant-ci", "NEBIUS_IAM_TOKEN")


def test_a_credentials_file_needs_an_explicit_tenant(tmp_path: Path) -> None:
    creds = tmp_path / "sa.json"
    with pytest.raises(ProfileError, match="tenant_id"):
        resolve_identity(NebiusSettings(credentials_file=creds), env={})
    ident = resolve_identity(NebiusSettings(credentials_file=creds, tenant_id="tenant-a"), env={})
    assert (ident.kind, ident.credentials_file, ident.tenant_id) == ("credentials-file", creds, "tenant-a")


def test_home_locates_the_default_config(tmp_path: Path) -> None:
    (tmp_path / ".nebius").mkdir()
    (tmp_path / ".nebius" / "config.yaml").write_text(yaml.safe_dump({"profiles": {"a": PROFILES["a"]}}))
    ident = resolve_identity(NebiusSettings(), env={"HOME": str(tmp_path)})
    assert ident.config_file == tmp_path / ".nebius" / "config.yaml"
    assert "token-file" not in ident.describe()  # describes, never dumps the profile


def test_profile_errors_are_user_input_errors() -> None:
    from npa_pulumi.cloud.errors import InvalidArgument
    from npa_pulumi.errors import EXIT_INVALID_INPUT, NpaError

    err = ProfileError("bad profile")
    assert isinstance(err, InvalidArgument) and isinstance(err, NpaError)
    assert err.exit_code == EXIT_INVALID_INPUT
    assert err.to_dict()["kind"] == "invalid-argument" and str(err) == "invalid-argument: bad profile"
