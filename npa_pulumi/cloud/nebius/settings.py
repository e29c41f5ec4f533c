"""Settings of the `nebius` adapter: where it talks to, as whom, and how patiently.

Everything here can come from keyword options (`make_cloud("nebius", **options)`) or from the
environment; an explicit option always wins over the environment.

Environment variables (all optional):

* `NPA_NEBIUS_ENDPOINT`     `host:port` that every Nebius service is routed to (a gateway, a proxy,
                            or the loopback fake in tests). Without it, services resolve to
                            `<service>.<domain>` as the SDK does by convention.
* `NPA_NEBIUS_DOMAIN`       API domain to use instead of the one derived from the region.
* `NPA_NEBIUS_INSECURE`     `1` to speak plaintext gRPC (loopback tests only).
* `NPA_NEBIUS_CA_FILE`      PEM bundle of roots to trust instead of the system store (test TLS).
* `NPA_NEBIUS_STORAGE_ENDPOINT`  S3 endpoint for bucket probes instead of
                            `https://storage.<region>.nebius.cloud`.
* `NPA_NEBIUS_CONFIG`       the Nebius CLI config file instead of `~/.nebius/config.yaml`.
* `NPA_NEBIUS_CREDENTIALS_FILE`  a service-account credentials JSON file to authenticate with
                            instead of a profile (the tenant then comes from `tenant_id`).
* `NPA_REUSE_IAM_TOKEN`     `1` to let an ambient `NEBIUS_IAM_TOKEN` decide the principal (CI that
                            injects a short-lived token). Otherwise that variable is ignored, because
                            a stale token silently shadows the profile.
* `NPA_NEBIUS_AUTH`         `federated` (what `--auth federated` sets): keyless CI. The CI provider's OIDC
                            token is exchanged for a Nebius IAM token of a service account through the
                            SDK's federated-credentials provider, and renewed as it expires
                            (federated.py). `auto` (the default): a profile, a credentials file or a token.
* `NPA_NEBIUS_SERVICE_ACCOUNT_ID`  with federated auth: the service account whose federated credentials
                            trust the OIDC issuer and subject (`serviceaccount-...`).
* `NPA_NEBIUS_FEDERATED_TOKEN_FILE`  with federated auth: a file holding the OIDC token (re-read at every
                            renewal; whoever writes it keeps it fresh). Without it, GitHub Actions' token
                            endpoint (`ACTIONS_ID_TOKEN_REQUEST_URL` / `_TOKEN`) is asked for a fresh one.
* `NPA_NEBIUS_FEDERATED_AUDIENCE`  with federated auth: the audience to ask GitHub Actions for, and that a
                            token file's token must carry (default: GitHub's default audience, no check).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from npa_pulumi.errors import UserInputError
from npa_pulumi.runtime.retry import RetryPolicy

ENV_ENDPOINT = "NPA_NEBIUS_ENDPOINT"
ENV_DOMAIN = "NPA_NEBIUS_DOMAIN"
ENV_INSECURE = "NPA_NEBIUS_INSECURE"
ENV_CA_FILE = "NPA_NEBIUS_CA_FILE"
ENV_STORAGE_ENDPOINT = "NPA_NEBIUS_STORAGE_ENDPOINT"
ENV_CONFIG = "NPA_NEBIUS_CONFIG"
ENV_CREDENTIALS_FILE = "NPA_NEBIUS_CREDENTIALS_FILE"
ENV_REUSE_IAM_TOKEN = "NPA_REUSE_IAM_TOKEN"
ENV_AUTH = "NPA_NEBIUS_AUTH"
ENV_SERVICE_ACCOUNT_ID = "NPA_NEBIUS_SERVICE_ACCOUNT_ID"
ENV_FEDERATED_TOKEN_FILE = "NPA_NEBIUS_FEDERATED_TOKEN_FILE"
ENV_FEDERATED_AUDIENCE = "NPA_NEBIUS_FEDERATED_AUDIENCE"
ENV_IAM_TOKEN = "NEBIUS_IAM_TOKEN"  # the SDK's and the CLI's ambient token variable
ENV_PROFILE = "NEBIUS_PROFILE"  # the CLI's profile selector, honoured when no profile is given

DEFAULT_CONFIG_FILE = Path("~/.nebius/config.yaml")

_TRUE = {"1", "true", "yes", "on"}


class AuthMode(StrEnum):
    """How the adapter authenticates. AUTO: a credentials file, else the CLI profile (or an ambient token
    the user opted into). FEDERATED: a CI provider's OIDC token exchanged for a service account's token."""

    AUTO = "auto"
    FEDERATED = "federated"


def env_flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in _TRUE


class RetrySettings(BaseModel):
    """Bounded exponential backoff for Unavailable. Mutations only retry with an idempotency key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_attempts: int = Field(default=5, ge=1)
    initial_backoff_s: float = Field(default=0.5, ge=0)
    max_backoff_s: float = Field(default=8.0, ge=0)
    multiplier: float = Field(default=2.0, ge=1)
    jitter: float = Field(default=0.2, ge=0, le=1)  # a fraction of each delay, randomised
    # Nebius honours the `X-Idempotency-Key` header on mutations, so a create re-sent with the same
    # key cannot duplicate a resource. Turn this off against an endpoint that does not honour it:
    # mutations are then never retried.
    idempotent_mutations: bool = True

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.max_attempts,
            initial_backoff_s=self.initial_backoff_s,
            multiplier=self.multiplier,
            max_backoff_s=self.max_backoff_s,
            jitter=self.jitter,
        )


class NebiusSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: str | None = None  # a ~/.nebius profile; None = NEBIUS_PROFILE, then the config default
    region: str | None = None  # picks the API domain (eu* -> api.eu.nebius.cloud)
    tenant_id: str | None = None  # must agree with the profile's tenant-id when both are known
    config_file: Path | None = None
    credentials_file: Path | None = None  # service-account credentials JSON instead of a profile
    endpoint: str | None = None  # host:port for every service (see NPA_NEBIUS_ENDPOINT)
    domain: str | None = None
    insecure: bool = False
    ca_file: Path | None = None
    storage_endpoint: str | None = None
    reuse_iam_token: bool = False
    auth: AuthMode = AuthMode.AUTO
    service_account_id: str | None = None  # federated: the account the OIDC subject acts as
    federated_token_file: Path | None = None  # federated: the OIDC token's file (else GitHub Actions)
    federated_audience: str | None = None  # federated: the audience to ask for / to expect
    federation_client_id: str = "npa-pulumi"
    call_timeout_s: float = Field(default=60.0, gt=0)  # one RPC attempt
    poll_interval_s: float = Field(default=1.0, gt=0)  # first operation poll; grows to max
    max_poll_interval_s: float = Field(default=10.0, gt=0)
    page_size: int = Field(default=100, ge=1)
    retry: RetrySettings = Field(default_factory=RetrySettings)

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> NebiusSettings:
        """Merge keyword options over the environment. Unknown options are rejected."""
        env = os.environ if env is None else env
        merged: dict[str, Any] = {}
        from_env = {
            "endpoint": env.get(ENV_ENDPOINT) or None,
            "domain": env.get(ENV_DOMAIN) or None,
            "insecure": env_flag(env, ENV_INSECURE),
            "ca_file": env.get(ENV_CA_FILE) or None,
            "storage_endpoint": env.get(ENV_STORAGE_ENDPOINT) or None,
            "config_file": env.get(ENV_CONFIG) or None,
            "credentials_file": env.get(ENV_CREDENTIALS_FILE) or None,
            "reuse_iam_token": env_flag(env, ENV_REUSE_IAM_TOKEN),
            "auth": env.get(ENV_AUTH, "").strip().lower() or None,
            "service_account_id": env.get(ENV_SERVICE_ACCOUNT_ID, "").strip() or None,
            "federated_token_file": env.get(ENV_FEDERATED_TOKEN_FILE) or None,
            "federated_audience": env.get(ENV_FEDERATED_AUDIENCE, "").strip() or None,
        }
        merged.update({k: v for k, v in from_env.items() if v not in (None, False)})
        merged.update({k: v for k, v in (options or {}).items() if v is not None})
        auth = merged.get("auth")
        if auth is not None and str(auth) not in {mode.value for mode in AuthMode}:
            raise UserInputError(
                f"authentication {auth!r} (--auth or ${ENV_AUTH}): expected one of "
                f"{', '.join(mode.value for mode in AuthMode)}"
            )
        retry = merged.get("retry")
        if isinstance(retry, Mapping):
            merged["retry"] = RetrySettings(**retry)
        return cls(**merged)
