"""The cloud adapter as the dynamic providers see it (they run in Pulumi's provider host process).

One adapter per (cloud, profile, region, tenant) is kept for the life of the provider process and shared by
every provider call: opening one per call would leave an SDK channel and a token-refresh task behind each
time. The tenant reaches the provider process through `NPA_TENANT_ID`, which the orchestrator puts in the
engine's environment: a service-account credentials file needs an explicit tenant, and a profile of another
tenant must be refused rather than used.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from npa_pulumi.cloud.factory import TENANT_ENV


@lru_cache(maxsize=16)
def _adapter(kind: str, profile: str | None, region: str | None, tenant_id: str | None) -> Any:
    from npa_pulumi.cloud.factory import make_cloud

    options = {"tenant_id": tenant_id} if kind == "nebius" and tenant_id else {}
    return make_cloud(kind, profile=profile, region=region, **options)  # type: ignore[arg-type]


def cloud_for(props: dict[str, Any], region: str | None = None) -> Any:
    tenant = props.get("tenant_id") or os.environ.get(TENANT_ENV) or None
    region = region or props.get("region") or None
    return _adapter(props["cloud"], props.get("profile") or None, region, tenant)
