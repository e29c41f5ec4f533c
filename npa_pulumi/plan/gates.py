"""The settings of an mk8s cluster's gates, from its resolved spec: the GPU health gate's (`GateConfig`), the
fabric check's and the fleet's KubeRay template. Offline, like the rest of planning: `up` plans them into
the cluster stack (engine/backends/mk8s/), `verify-*` and `health` judge a running cluster by them."""

from __future__ import annotations

from npa_pulumi.kube.fabric_check import FabricConfig
from npa_pulumi.kube.gpu_health.config import GateConfig
from npa_pulumi.kube.kuberay import RayTemplate, cpu_node_group_name
from npa_pulumi.plan.rtx_values import cluster_rtx_values
from npa_pulumi.plan.targets import ResolvedCluster
from npa_pulumi.runtime.pins import kuberay_operator_image
from npa_pulumi.runtime.presets import gpus_per_node
from npa_pulumi.spec.constants import MIG_RESOURCES_PER_GPU, MIG_TOOLKIT_VERSION


def kuberay_template(cluster: ResolvedCluster) -> RayTemplate | None:
    """The fleet's KubeRay template for a cluster with `kuberay.enabled` (npa_pulumi.kube.kuberay)."""
    ray = cluster.kuberay
    if ray is None:
        return None
    return RayTemplate(
        worker_replicas=ray.worker_replicas,
        worker_cpus=ray.worker_cpus,
        worker_memory_gib=ray.worker_memory_gib,
        ray_version=ray.ray_version,
        image=ray.image,
        operator_image=kuberay_operator_image(),
        cpu_node_group=cpu_node_group_name(cluster.name),
    )


def mig_version_pins(versions: dict[str, str]) -> dict[str, str]:
    """The spec's MIG pins (`gpu_operator_version`, ...) under the names the gate checks them by
    (npa_pulumi.kube.gpu_health.mig.MIG_PINNED_COMPONENTS), plus the container toolkit of that release."""
    pins = {name.removeprefix("gpu_").removesuffix("_version"): v for name, v in versions.items()}
    return {**pins, "toolkit": MIG_TOOLKIT_VERSION}


def health_gate_config(cluster: ResolvedCluster) -> GateConfig:
    """The gate's settings for one cluster. A CPU-only
    cluster gets the cluster-basics check: every node Ready with a boot id, nothing else. A MIG cluster gets
    MIG readiness: the exact layout on every GPU node, twice in a row, then a smoke on a MIG device."""
    gpus = cluster.gpu_nodes
    has_gpus = cluster.gpu_count() > 0 and gpus is not None
    health = cluster.health
    mig = cluster.mig if has_gpus else None
    repositories = _rtx_repository_check(cluster, has_gpus)
    return GateConfig(
        expected_nodes=cluster.cpu_count() + cluster.gpu_count(),
        expected_gpu_nodes=cluster.gpu_count() if has_gpus else 0,
        gpus_per_node=gpus_per_node(gpus.preset) if has_gpus and gpus is not None else 0,
        gpu_platform=gpus.platform if has_gpus and gpus is not None else "",
        driver_mode=cluster.gpu_driver_mode if has_gpus else "",
        nvswitch=bool(cluster.nvswitch_topology) and has_gpus,
        stabilization_s=float(health.stabilization_seconds) if has_gpus else 0.0,
        timeout_s=float(health.timeout_minutes * 60),
        cuda_smoke=bool(health.cuda_smoke) and has_gpus,
        smoke_image=health.cuda_smoke_image,
        graphics_smoke=bool(health.graphics_smoke) and has_gpus,
        graphics_image=health.graphics_smoke_image,
        driver_repo_configmap=repositories[0] if repositories else "",
        driver_repositories=repositories[1] if repositories else None,
        mig_resources=dict(MIG_RESOURCES_PER_GPU) if mig is not None else None,
        mig_strategy=mig.strategy if mig is not None else "",
        mig_config=mig.config if mig is not None else "",
        mig_versions=mig_version_pins(mig.versions) if mig is not None else None,
    )


def rtx_values_revision(cluster: ResolvedCluster) -> str:
    """The RTX operator values' revision ("" without the profile or GPUs): the gate re-runs when it
    changes, as the driver pods roll."""
    values = cluster_rtx_values(cluster) if cluster.gpu_count() > 0 else None
    return values.revision() if values is not None else ""


def _rtx_repository_check(cluster: ResolvedCluster, has_gpus: bool) -> tuple[str, dict[str, str]] | None:
    """The gate's repository-mount check of an RTX cluster with package repositories: the ConfigMap and
    each file's SHA-256 (never the sources themselves: the gate's settings are kept in stack state)."""
    values = cluster_rtx_values(cluster) if has_gpus else None
    if values is None or not values.repo_config_map:
        return None
    return values.repo_config_map, dict(values.repositories)


def fabric_check_config(cluster: ResolvedCluster) -> FabricConfig:
    """The fabric check's settings for one cluster."""
    fabric = cluster.fabric_check
    return FabricConfig(
        gpus_per_node=gpus_per_node(cluster.gpu_nodes.preset) if cluster.gpu_nodes is not None else 0,
        expected_gpu_nodes=cluster.gpu_count(),
        intra_node=fabric.intra_node,
        inter_node=fabric.inter_node,
        intra_min_busbw_gbps=float(fabric.intra_node_min_busbw_gbps),
        inter_min_busbw_gbps=float(fabric.inter_node_min_busbw_gbps),
        threshold_source=fabric.threshold_source,
        min_bytes=fabric.min_bytes,
        max_bytes=fabric.max_bytes,
        step_factor=fabric.step_factor,
        timeout_s=float(fabric.timeout_minutes * 60),
        not_applicable=fabric.not_applicable,
        inter_not_applicable=fabric.inter_not_applicable,
    )
