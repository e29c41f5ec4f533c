"""The cloud adapter as the dynamic providers see it (they run in Pulumi's provider host process).

One adapter per (cloud, profile, region, tenant) is kept for the life of the provider process and shared by
every provider call: opening one per call would leave an SDK channel and a token-refresh task behind each
time. The tenant reaches the provider process through `NPA_TENANT_ID`, which the orchestrator puts in the
engine's environment (runtime/provider_env.py when the orchestrator serves the providers itself): a
service-account credentials file needs an explicit tenant, and a profile of another
tenant must be refused rather than used.
"""

from __future__ import annotations

from functools import lru_cache

from npa_pulumi.cloud.factory import AUTH_ENV, TENANT_ENV, CloudKind
from npa_pulumi.cloud.port import CloudPort
from npa_pulumi.runtime import provider_env


@lru_cache(maxsize=16)
def _adapter(
    kind: CloudKind, profile: str | None, region: str | None, tenant_id: str | None, auth: str | None
) -> CloudPort:
    from npa_pulumi.cloud.factory import make_cloud

    options: dict[str, str] = {}
    if kind == "nebius":
        options = {"tenant_id": tenant_id} if tenant_id else {}
        if auth:
            options["auth"] = auth
    return make_cloud(kind, profile=profile, region=region, **options)


def cloud_for(cloud: str, profile: str, region: str, tenant_id: str = "") -> CloudPort:
    if cloud not in ("local", "nebius"):
        raise ValueError(f"unknown cloud {cloud!r} (expected 'local' or 'nebius')")
    kind: CloudKind = "nebius" if cloud == "nebius" else "local"
    tenant = tenant_id or provider_env.get(TENANT_ENV) or None
    # The command's `--auth` reaches the provider process as the engine's NPA_NEBIUS_AUTH (engine/context.py).
    return _adapter(kind, profile or None, region or None, tenant, provider_env.get(AUTH_ENV) or None)
