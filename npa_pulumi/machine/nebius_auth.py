"""`doctor --cloud nebius`: how this machine authenticates to Nebius, found as the adapter finds it
(cloud/nebius/profile.py), and what that identity may do. The first question of a tenant's first hour:

* the auth path: federated credentials (a CI job's OIDC token exchanged for a service account's), a Nebius
  CLI profile, a service account's key file, or an IAM token in the environment;
* the identity it acts as: a service account or a user, and its tenant (the API's own answer);
* a token minted now: when it expires and how it is renewed (tokens are dropped: never printed or stored);
* whether that identity can read the fleet's projects: those the spec names by id (`--spec`), else the
  tenant's project list, where the fleet finds the projects it names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from npa_pulumi.errors import NpaError
from npa_pulumi.output.doctor import Check, CheckStatus

if TYPE_CHECKING:
    from npa_pulumi.cloud.nebius import NebiusCloud
    from npa_pulumi.cloud.nebius.profile import Identity
    from npa_pulumi.cloud.port import Principal
    from npa_pulumi.spec import FleetSpec

OK, FAIL, SKIP = CheckStatus.OK, CheckStatus.FAIL, CheckStatus.SKIP
CALL_TIMEOUT_S = 20.0
PROJECTS = "nebius-projects"


class AuthPath(StrEnum):
    """How the adapter authenticates (the `auth_path` of doctor's JSON)."""

    FEDERATED = "federated-credentials"
    PROFILE = "cli-profile"
    KEY_FILE = "service-account-key-file"
    ENVIRONMENT_TOKEN = "environment-token"


class PrincipalKind(StrEnum):
    SERVICE_ACCOUNT = "service-account"
    USER = "user"


@dataclass(frozen=True)
class FleetProject:
    """A project of the spec, as doctor checks it: by id when the spec names one, else by display name."""

    key: str
    project_id: str = ""
    display_name: str = ""


def fleet_projects(spec: FleetSpec) -> list[FleetProject]:
    return [
        FleetProject(p.key(), p.project_id, "" if p.project_id else p.display_name(spec.project_prefix))
        for p in spec.projects
    ]


@dataclass(frozen=True)
class AuthFound:
    path: AuthPath
    described: str  # the path in words, naming where it was found
    refresh: str  # how a token of this path is renewed


def auth_found(identity: Identity, env: Mapping[str, str] | None = None) -> AuthFound:
    """The auth path of a resolved identity. An ambient NEBIUS_IAM_TOKEN that the adapter may read (opted in
    with NPA_REUSE_IAM_TOKEN) decides the principal over the profile, so it is the path then."""
    from npa_pulumi.cloud.nebius.settings import ENV_IAM_TOKEN

    env = os.environ if env is None else env
    if identity.kind == "federated":
        return AuthFound(
            AuthPath.FEDERATED,
            identity.describe(),
            f"a fresh OIDC token ({identity.oidc_source}) is exchanged for a new IAM token before it expires",
        )
    if identity.kind == "credentials-file":
        return AuthFound(
            AuthPath.KEY_FILE,
            identity.describe(),
            "a JWT signed with the service account's key is exchanged for a new IAM token before it expires",
        )
    environment = (
        f"${ENV_IAM_TOKEN}" + (f" (over profile {identity.profile!r})" if identity.profile else "")
        if identity.token_env == ENV_IAM_TOKEN and env.get(ENV_IAM_TOKEN)
        else ""
    )
    if identity.kind == "env-token" or environment:
        return AuthFound(
            AuthPath.ENVIRONMENT_TOKEN,
            environment or f"${ENV_IAM_TOKEN}",
            f"none: the token is used as given until it expires; export a fresh one (or unset "
            f"{ENV_IAM_TOKEN} to use the profile)",
        )
    return AuthFound(
        AuthPath.PROFILE, f"{identity.describe()} ({identity.config_file})", _profile_refresh(identity)
    )


def _profile_refresh(identity: Identity) -> str:
    """How the profile's own credentials are renewed, from its entry in the CLI configuration."""
    from npa_pulumi.cloud.nebius.profile import load_config

    try:
        body = (
            load_config(identity.config_file).get("profiles", {}).get(identity.profile, {})
            if identity.config_file
            else {}
        )
    except NpaError:
        body = {}
    if body.get("token-file"):
        return (
            f"read again from the profile's token-file ({body['token-file']}); whatever writes it renews it"
        )
    if str(body.get("auth-type", "")).startswith("service"):
        return (
            "a JWT signed with the profile's service-account key is exchanged for a new token before expiry"
        )
    return "by the Nebius CLI's login (`nebius iam whoami` signs in again when the session has expired)"


def principal_json(principal: Principal) -> dict[str, Any]:
    kind = (
        PrincipalKind.SERVICE_ACCOUNT
        if principal.project_id or principal.subject.startswith("serviceaccount-")
        else PrincipalKind.USER
    )
    found: dict[str, Any] = {"kind": str(kind), "id": principal.subject, "tenant_id": principal.tenant_id}
    if principal.project_id:
        found["project_id"] = principal.project_id  # a service account's own project
    return found


def token_json(expires_at: datetime | None, refresh: str, now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    if expires_at is None:
        return {"expires_at": None, "lifetime_s": None, "refresh": refresh}
    return {
        "expires_at": expires_at.isoformat(timespec="seconds"),
        "lifetime_s": max(0, round((expires_at - now).total_seconds())),
        "refresh": refresh,
    }


def _lifetime_text(token: Mapping[str, Any]) -> str:
    seconds = token.get("lifetime_s")
    if seconds is None:
        return "a token with no expiry of its own"
    return f"a token valid for {seconds // 60} min"


def identity_checks(
    name: str, identity: Identity, options: Mapping[str, Any], projects: Sequence[FleetProject] | None
) -> list[Check]:
    """The identity's check (`name`: nebius-profile or nebius-federated) and the projects' check, both from
    one adapter: one token minted (and dropped), one profile read, the project reads."""
    from npa_pulumi.cloud.errors import CloudError
    from npa_pulumi.cloud.factory import make_cloud

    found = auth_found(identity)
    details: dict[str, Any] = {
        "identity": identity.describe(),
        "auth_path": str(found.path),
        "auth": found.described,
    }
    if identity.service_account_id:
        details["service_account_id"] = identity.service_account_id
    try:
        with make_cloud("nebius", **options, call_timeout_s=CALL_TIMEOUT_S) as cloud:  # type: ignore[attr-defined]
            nebius: NebiusCloud = cloud
            details["token"] = token_json(nebius.token_expiry(), found.refresh)
            principal = nebius.principal()
            details["principal"] = principal_json(principal)
            details["tenant_id"] = principal.tenant_id
            readable = projects_check(nebius, principal.tenant_id, projects)
    except (NpaError, CloudError, OSError, ValueError) as err:
        summary = f"{found.described}: a token could not be minted or the first call failed: {err}"
        repair = (
            "`npa-pulumi backend init --ci-repository OWNER/REPO` prints the federated credentials"
            if found.path is AuthPath.FEDERATED
            else "`nebius iam whoami` to re-authenticate"
        )
        skipped = Check(PROJECTS, SKIP, "not checked: the identity could not authenticate")
        return [Check(name, FAIL, summary, repair, details), skipped]
    who = details["principal"]
    summary = (
        f"{found.path.value.replace('-', ' ')}: {found.described}; acts as {who['kind']} {who['id']} of "
        f"tenant {who['tenant_id']}; {_lifetime_text(details['token'])}, renewed: {found.refresh}"
    )
    return [Check(name, OK, summary, details=details), readable]


def projects_check(cloud: NebiusCloud, tenant_id: str, projects: Sequence[FleetProject] | None) -> Check:
    """Whether the identity can read the fleet's projects: each one the spec names by id, and the tenant's
    project list (where the fleet finds, or creates, the projects it names)."""
    from npa_pulumi.cloud.errors import CloudError

    wanted = list(projects or [])
    readable: dict[str, str] = {}
    refused: dict[str, str] = {}
    for project in (p for p in wanted if p.project_id):
        try:
            readable[project.key] = cloud.get_project(project.project_id).id
        except CloudError as err:
            refused[project.key] = f"{project.project_id}: {err}"
    named = [p for p in wanted if not p.project_id]
    listed: list[str] | None = None
    if named or not wanted:
        try:
            listed = [p.name for p in cloud.list_projects(tenant_id)]
        except CloudError as err:
            refused["(the tenant's projects)"] = str(err)
    details: dict[str, Any] = {"tenant_id": tenant_id, "readable": readable, "refused": refused}
    if listed is not None:
        details["listed"] = len(listed)
        details["found_by_name"] = {p.key: p.display_name in listed for p in named}
    fix = "grant the identity a viewer role in the project(s) (or the tenant), or run with another identity"
    if refused:
        why = "; ".join(f"{key}: {reason}" for key, reason in refused.items())
        return Check(PROJECTS, FAIL, f"the identity cannot read the fleet's projects: {why}", fix, details)
    parts = [f"{len(readable)} project(s) by id"] if readable else []
    if listed is not None:
        parts.append(f"the tenant's {len(listed)} project(s)")
    return Check(PROJECTS, OK, f"the identity can read {' and '.join(parts)}", details=details)
