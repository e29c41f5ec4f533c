"""Marketplace releases (`nebius_applications_v1alpha1_k8s_release`) as the cluster addons the agent
models (kube/shapes.py): what each product leaves in a cluster that the health gate reads. Products the
agent does not model (the network operator, observability, Ray Serve) are recorded and add nothing."""

from __future__ import annotations

from typing import Any

from npa_pulumi.kube.gpu_operator import REVISION_VALUE_KEY

# The addon keys releases own; set_cluster_addons (the local cloud's API) owns the others.
RELEASE_ADDON_KEYS = ("gpu_driver", "mig", "kuberay", "rtx_driver")
DEFAULT_MIG_CONFIG = "all-balanced"

# The GPU Operator chart's values the mapping reads (the release's `set`, as npa-pulumi's override files and
# upstream's module write them): what the chart would make of them is what the health gate reads in the
# cluster (the ClusterPolicy's versions, MIG Manager, the RTX driver profile). Nothing else of a release's
# values reaches the local cloud's database: they may be secret.
_VERSION_KEYS = {
    "operator.version": "operator",
    "driver.version": "driver",
    "devicePlugin.version": "device_plugin",
    "gfd.version": "gfd",
    "migManager.version": "mig_manager",
}
_RTX_PLATFORM = "nebius.nvidiaDriverCRDPatch.profiles[0].platform"
_RTX_PRESET = "nebius.nvidiaDriverCRDPatch.profiles[0].preset"
_TOOLKIT_ENV = tuple(f"toolkit.env[{i}].{part}" for i in range(4) for part in ("name", "value"))
SETTINGS_READ: tuple[str, ...] = (
    "mig.strategy",
    "migManager.config.default",
    *_VERSION_KEYS,
    _RTX_PLATFORM,
    _RTX_PRESET,
    "driver.rdma.enabled",
    "driver.repoConfig.configMapName",
    *_TOOLKIT_ENV,
    REVISION_VALUE_KEY,
)


def addons_of(release: dict[str, Any]) -> dict[str, Any]:
    """The addons one release brings, from its product slug and the (non-secret) chart settings the
    caller passed as `settings` (SETTINGS_READ)."""
    slug = release.get("product_slug", "")
    settings = release.get("settings") or {}
    if slug == "nebius/nvidia-gpu-operator":
        return _gpu_operator(settings)
    if slug == "nebius/nvidia-device-plugin":
        return {"gpu_driver": "managed-image"}
    if slug == "nebius/ray-cluster":
        return {"kuberay": {"worker_replicas": 1}}
    return {}


def _gpu_operator(settings: dict[str, Any]) -> dict[str, Any]:
    addons: dict[str, Any] = {"gpu_driver": "operator"}
    strategy = str(settings.get("mig.strategy") or "none")
    if strategy != "none":
        config = str(settings.get("migManager.config.default") or DEFAULT_MIG_CONFIG)
        versions = {name: str(settings.get(key) or "") for key, name in _VERSION_KEYS.items()}
        addons["mig"] = {"strategy": strategy, "config": config, "versions": versions}
    if settings.get(_RTX_PLATFORM) or settings.get(_RTX_PRESET):
        addons["rtx_driver"] = _rtx_driver(settings)
    return addons


def _rtx_driver(settings: dict[str, Any]) -> dict[str, Any]:
    """The RTX rendering profile as the chart's values carry it (shapes.rtx_driver reads this shape)."""
    platform, preset = str(settings.get(_RTX_PLATFORM) or ""), str(settings.get(_RTX_PRESET) or "")
    env = []
    for index in range(len(_TOOLKIT_ENV) // 2):
        name = settings.get(f"toolkit.env[{index}].name")
        if name:
            env.append({"name": str(name), "value": str(settings.get(f"toolkit.env[{index}].value") or "")})
    values: dict[str, Any] = {
        "nebius": {"nvidiaDriverCRDPatch": {"profiles": [{"platform": platform, "preset": preset}]}},
        "driver": {
            "rdma": {"enabled": str(settings.get("driver.rdma.enabled") or "").lower() == "true"},
            "repoConfig": {"configMapName": str(settings.get("driver.repoConfig.configMapName") or "")},
        },
        "toolkit": {"env": env},
    }
    return {
        "platform": platform,
        "preset": preset,
        "values": values,
        "revision": str(settings.get(REVISION_VALUE_KEY) or ""),
    }


def merged_addons(current: dict[str, Any], releases: list[dict[str, Any]]) -> dict[str, Any]:
    """The cluster's addons: the keys releases own, from the releases installed now (in install order);
    every other key as it was."""
    merged = {k: v for k, v in current.items() if k not in RELEASE_ADDON_KEYS}
    for release in releases:
        merged.update(release.get("addons") or {})
    return merged
