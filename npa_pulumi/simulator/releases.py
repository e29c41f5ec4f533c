"""Marketplace releases (`nebius_applications_v1alpha1_k8s_release`) as the cluster addons the agent
models (kube/shapes.py): what each product leaves in a cluster that the health gate reads. Products the
agent does not model (the network operator, observability, Ray Serve) are recorded and add nothing."""

from __future__ import annotations

from typing import Any

# The addon keys releases own; set_cluster_addons (soperator's stand-in recipe) owns the others.
RELEASE_ADDON_KEYS = ("gpu_driver", "mig", "kuberay")
DEFAULT_MIG_CONFIG = "all-balanced"


def addons_of(release: dict[str, Any]) -> dict[str, Any]:
    """The addons one release brings, from its product slug and the (non-secret) chart settings the
    caller passed as `settings` (the GPU operator's `mig.strategy`)."""
    slug = release.get("product_slug", "")
    settings = release.get("settings") or {}
    if slug == "nebius/nvidia-gpu-operator":
        addons: dict[str, Any] = {"gpu_driver": "operator"}
        strategy = str(settings.get("mig.strategy") or "none")
        if strategy != "none":
            config = str(settings.get("migManager.config.default") or DEFAULT_MIG_CONFIG)
            addons["mig"] = {"strategy": strategy, "config": config}
        return addons
    if slug == "nebius/nvidia-device-plugin":
        return {"gpu_driver": "managed-image"}
    if slug == "nebius/ray-cluster":
        return {"kuberay": {"worker_replicas": 1}}
    return {}


def merged_addons(current: dict[str, Any], releases: list[dict[str, Any]]) -> dict[str, Any]:
    """The cluster's addons: the keys releases own, from the releases installed now (in install order);
    every other key as it was."""
    merged = {k: v for k, v in current.items() if k not in RELEASE_ADDON_KEYS}
    for release in releases:
        merged.update(release.get("addons") or {})
    return merged
