"""Which Nebius principal the adapter acts as, resolved before any RPC.

The rules come from the fleet tool this product replaces:

* an explicit profile (`--profile`, else the spec's `profile`) wins; otherwise `NEBIUS_PROFILE`, then
  the config's `default`, then the only profile there is;
* the tenant comes from *that* profile's `tenant-id`. An explicitly chosen profile without one is a
  hard error: silently falling back to another tenant is how fleets land in the wrong account;
* a tenant given alongside (the spec's `tenant_id`) must agree with the profile's;
* an ambient `NEBIUS_IAM_TOKEN` is ignored unless `NPA_REUSE_IAM_TOKEN` is set, because the token, not
  the profile, decides the principal, and a stale one silently shadows the profile;
* federated auth (`--auth federated`, federated.py) reads no CLI configuration at all: the principal is the
  named service account, its tenant the spec's or, failing that, the account's own (asked of the API).

Nothing here imports the SDK or touches the network.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...errors import UserInputError
from ..errors import InvalidArgument, Unauthenticated
from .settings import (
    DEFAULT_CONFIG_FILE,
    ENV_IAM_TOKEN,
    ENV_PROFILE,
    ENV_SERVICE_ACCOUNT_ID,
    AuthMode,
    NebiusSettings,
)

# The SDK's config reader takes the *name* of the token variable. Pointing it at a variable that is
# never set is the documented way to disable only the ambient-token lookup.
DISABLED_TOKEN_ENV = "NPA_NEBIUS_IAM_TOKEN_DISABLED"


class ProfileError(InvalidArgument, UserInputError):
    """The Nebius CLI configuration cannot give an unambiguous identity.

    Both a cloud error (kind `invalid-argument`) and the product's user-input error, so the CLI reports
    it without a traceback and exits 2.
    """


CredentialsKind = Literal["profile", "credentials-file", "env-token", "federated"]


@dataclass(frozen=True)
class Identity:
    """How to authenticate and which tenant that principal works in. Holds no secrets."""

    kind: CredentialsKind
    profile: str  # "" when not profile based
    tenant_id: str  # "" when unknown until the API is asked
    config_file: Path | None
    credentials_file: Path | None
    profile_endpoint: str  # the profile's `endpoint`, "" if none
    token_env: str  # env var the SDK may read an IAM token from (DISABLED_TOKEN_ENV = none)
    explicit_profile: bool
    parent_id: str = ""  # the profile's `parent-id` (a project): where an empty spec region comes from
    service_account_id: str = ""  # federated: the account the OIDC subject acts as
    oidc_source: str = ""  # federated: where the OIDC token comes from, in words

    def describe(self) -> str:
        if self.kind == "federated":
            return f"federated credentials of {self.service_account_id} ({self.oidc_source})"
        if self.kind == "profile":
            return f"profile {self.profile!r}"
        if self.kind == "credentials-file":
            return f"service-account credentials {self.credentials_file}"
        return f"${ENV_IAM_TOKEN}"


def load_config(path: Path) -> dict[str, Any]:
    """Read the Nebius CLI config. Raises ProfileError when it is missing or malformed."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(
            f"Nebius CLI config {path} not found; create a profile with `nebius profile create`"
        ) from None
    except OSError as exc:
        raise ProfileError(f"cannot read Nebius CLI config {path}: {exc.strerror}") from None
    try:
        data = YAML(typ="safe").load(text)
    except YAMLError as exc:
        raise ProfileError(f"Nebius CLI config {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict) or not data["profiles"]:
        raise ProfileError(f"Nebius CLI config {path} has no profiles")
    return data


def choose_profile(
    config: Mapping[str, Any], explicit: str | None, env: Mapping[str, str]
) -> tuple[str, bool]:
    """The profile name to use and whether it was chosen explicitly (by flag, spec or env)."""
    profiles = config["profiles"]
    if explicit:
        name, is_explicit = explicit, True
    elif env.get(ENV_PROFILE):
        name, is_explicit = env[ENV_PROFILE], True
    elif isinstance(config.get("default"), str) and config["default"]:
        name, is_explicit = config["default"], False
    elif len(profiles) == 1:
        name, is_explicit = next(iter(profiles)), False
    else:
        raise ProfileError(
            "the Nebius CLI config has several profiles and no default; pass --profile or set `profile` "
            f"in the spec (profiles: {', '.join(sorted(profiles))})"
        )
    if name not in profiles:
        raise ProfileError(f"Nebius profile {name!r} not found (profiles: {', '.join(sorted(profiles))})")
    if not isinstance(profiles[name], dict):
        raise ProfileError(f"Nebius profile {name!r} is malformed")
    return name, is_explicit


def _agree(profile_tenant: str, wanted: str | None, profile: str) -> str:
    if wanted and profile_tenant and wanted != profile_tenant:
        raise ProfileError(
            f"tenant {wanted!r} was asked for but profile {profile!r} belongs to tenant {profile_tenant!r}"
        )
    return profile_tenant or (wanted or "")


def resolve_identity(settings: NebiusSettings, env: Mapping[str, str] | None = None) -> Identity:
    env = os.environ if env is None else env
    if settings.auth is AuthMode.FEDERATED:
        return _federated_identity(settings, env)
    token_env = ENV_IAM_TOKEN if settings.reuse_iam_token else DISABLED_TOKEN_ENV
    if settings.credentials_file is not None:
        if not settings.tenant_id:
            raise ProfileError("a service-account credentials file needs an explicit tenant_id")
        return Identity(
            kind="credentials-file",
            profile="",
            tenant_id=settings.tenant_id,
            config_file=None,
            credentials_file=settings.credentials_file.expanduser(),
            profile_endpoint="",
            token_env=token_env,
            explicit_profile=False,
        )
    config_path = (settings.config_file or _default_config(env)).expanduser()
    if (
        not config_path.is_file()
        and not settings.profile
        and settings.reuse_iam_token
        and env.get(ENV_IAM_TOKEN)
    ):
        # CI with an injected token and no CLI config at all: the token is the whole identity.
        return Identity(
            kind="env-token",
            profile="",
            tenant_id=settings.tenant_id or "",
            config_file=None,
            credentials_file=None,
            profile_endpoint="",
            token_env=ENV_IAM_TOKEN,
            explicit_profile=False,
        )
    config = load_config(config_path)
    name, explicit = choose_profile(config, settings.profile, env)
    body = config["profiles"][name]
    tenant = body.get("tenant-id") or ""
    if not isinstance(tenant, str):
        raise ProfileError(f"Nebius profile {name!r} has a non-string tenant-id")
    if explicit and not tenant:
        raise ProfileError(
            f"Nebius profile {name!r} has no tenant-id; add `tenant-id: <tenant>` to it in {config_path} "
            "so the fleet cannot land in another tenant"
        )
    endpoint = body.get("endpoint") or ""
    if not isinstance(endpoint, str):
        raise ProfileError(f"Nebius profile {name!r} has a non-string endpoint")
    parent_id = body.get("parent-id") or ""
    if not isinstance(parent_id, str):
        raise ProfileError(f"Nebius profile {name!r} has a non-string parent-id")
    return Identity(
        kind="profile",
        profile=name,
        tenant_id=_agree(tenant, settings.tenant_id, name),
        config_file=config_path,
        credentials_file=None,
        profile_endpoint=endpoint,
        token_env=token_env,
        explicit_profile=explicit,
        parent_id=parent_id,
    )


def _federated_identity(settings: NebiusSettings, env: Mapping[str, str]) -> Identity:
    """The service account a CI job's OIDC token is exchanged for. A token file is read and checked here,
    before any RPC (an expired one, or one for another audience, is bad input); GitHub's endpoint is only
    asked when the first token is needed."""
    from .federated import GithubActions, OidcTokenError, oidc_source

    account = (settings.service_account_id or "").strip()
    if not account:
        raise ProfileError(
            f"federated auth needs the service account the OIDC token acts as: set {ENV_SERVICE_ACCOUNT_ID} "
            "(the account whose federated credentials trust this CI's issuer and subject)"
        )
    if settings.credentials_file is not None:
        raise ProfileError("federated auth and a service-account credentials file exclude each other")
    try:
        source = oidc_source(settings, env)
        if not isinstance(source, GithubActions):
            source.fetch()
    except OidcTokenError as exc:
        raise ProfileError(f"federated auth: {exc}") from None
    return Identity(
        kind="federated",
        profile="",
        tenant_id=settings.tenant_id or "",
        config_file=None,
        credentials_file=None,
        profile_endpoint="",
        token_env=DISABLED_TOKEN_ENV,
        explicit_profile=False,
        service_account_id=account,
        oidc_source=source.describe(),
    )


def _default_config(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    if home:
        return Path(home) / ".nebius" / "config.yaml"
    return DEFAULT_CONFIG_FILE


def require_tenant(identity: Identity, candidates: list[str]) -> str:
    """The tenant to use once the API has told us which tenants the principal belongs to."""
    if identity.tenant_id:
        return identity.tenant_id
    if len(candidates) == 1:
        return candidates[0]
    where = identity.describe()
    if not candidates:
        raise Unauthenticated(f"cannot tell the tenant of {where}; set tenant-id in the profile or tenant_id")
    raise ProfileError(
        f"{where} belongs to several tenants ({', '.join(sorted(candidates))}); set tenant-id in the profile"
    )
