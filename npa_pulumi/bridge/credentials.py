"""How Terraform authenticates for one stack's run: through the Nebius profile (refreshable), or with one
IAM token minted for the run.

A token minted before `terraform apply` is captured by the recipe's providers at plan time, and a long
apply or destroy (GPU workers provisioning for an hour or more) can outlive it. So when the recipe supports
it — the default recipe does (its override files, bridge/overrides.py, point the Nebius provider at the
CLI profile and the Kubernetes-side providers at the profile-bound exec plugin) — the bridge passes no
token at all: no `TF_VAR_iam_token`, no `NEBIUS_IAM_TOKEN`, only the profile's name.

The token path stays for every other recipe (`--recipe-dir`, `--recipe-ref`, soperator's local stand-in),
for a service-account credentials file (`NPA_NEBIUS_CREDENTIALS_FILE`: no CLI profile to hand over) and for an
ambient token the user asked to reuse (`NPA_REUSE_IAM_TOKEN=1`: that token decides the principal, as
everywhere else). A token-path run whose expected run time exceeds the token's life is warned about.

Federated auth (`--auth federated`, keyless CI) takes the token path too: there is no CLI profile that
Terraform could authenticate through, and the CI job's OIDC token is a secret of that job only.

On Nebius every token-path terraform invocation gets a token of its own (bridge/terraform.py
`renew_token`): `init` the one minted for the provider call, then each `plan`, `apply`, `destroy`,
`output` a synchronous renewal through the adapter's bearer (a fresh exchange for federated credentials and
service accounts). So one invocation, not a whole create or update, has to fit in a token's life; the
long-run warning still applies, since one `apply` of GPU workers can be long.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from npa_pulumi.bridge.overrides import PROFILE_VARIABLE

log = logging.getLogger(__name__)

# Recipe sources whose providers authenticate through the profile (bridge/recipe.py's source kinds).
PROFILE_AUTH_SOURCES: Final = frozenset({"default"})
# A Nebius IAM access token's life, and what one cluster stack's terraform run may take (workers
# provisioning, the GPU operator): both overridable, in seconds.
ENV_TOKEN_LIFETIME = "NPA_IAM_TOKEN_LIFETIME_S"
ENV_EXPECTED_RUN = "NPA_EXPECTED_TERRAFORM_RUN_S"
DEFAULT_TOKEN_LIFETIME_S: Final = 12 * 3600
DEFAULT_EXPECTED_RUN_S: Final = 2 * 3600


@dataclass(frozen=True)
class TerraformAuth:
    mode: Literal["profile", "token"]
    profile: str = ""
    reason: str = ""

    def env(self) -> dict[str, str]:
        """What the run's environment carries for this mode (the token itself is added by the caller)."""
        if self.mode != "profile":
            return {}
        env = {f"TF_VAR_{PROFILE_VARIABLE}": self.profile}
        if self.profile:
            env["NEBIUS_PROFILE"] = self.profile  # the exec plugin's and the CLI's own selector
        return env


def _seconds(environ: Mapping[str, str], name: str, default: int) -> int:
    try:
        value = int(environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def terraform_auth(
    cloud: str, source_kind: str, profile: str, environ: Mapping[str, str] | None = None
) -> TerraformAuth:
    """The authentication of one stack's terraform run."""
    from npa_pulumi.cloud.nebius.settings import (
        ENV_AUTH,
        ENV_CREDENTIALS_FILE,
        ENV_REUSE_IAM_TOKEN,
        AuthMode,
        env_flag,
    )

    environ = os.environ if environ is None else environ
    if cloud != "nebius":
        return TerraformAuth("token", reason=f"the {cloud} cloud")
    if environ.get(ENV_AUTH, "").strip().lower() == AuthMode.FEDERATED:
        return TerraformAuth("token", reason="federated credentials: a freshly exchanged token per run")
    if source_kind not in PROFILE_AUTH_SOURCES:
        return TerraformAuth("token", reason="the recipe authenticates with TF_VAR_iam_token")
    if env_flag(environ, ENV_REUSE_IAM_TOKEN):
        return TerraformAuth("token", reason=f"{ENV_REUSE_IAM_TOKEN} is set: the ambient token decides")
    if environ.get(ENV_CREDENTIALS_FILE):
        return TerraformAuth("token", reason="no CLI profile to authenticate through")
    return TerraformAuth("profile", profile=profile)


def token_life_warning(environ: Mapping[str, str] | None = None) -> str | None:
    """A warning when a token-path run is expected to outlive its token; None when it fits."""
    environ = os.environ if environ is None else environ
    life = _seconds(environ, ENV_TOKEN_LIFETIME, DEFAULT_TOKEN_LIFETIME_S)
    expected = _seconds(environ, ENV_EXPECTED_RUN, DEFAULT_EXPECTED_RUN_S)
    if expected <= life:
        return None
    return (
        f"WARNING: this terraform run authenticates with one IAM token minted for it (about {life // 60} min "
        f"of life) but may take {expected // 60} min; a long apply or destroy can fail once it expires. Use "
        "the default recipe with a Nebius profile (refreshable), or a shorter run"
    )
