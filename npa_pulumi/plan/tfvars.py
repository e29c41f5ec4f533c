"""terraform.tfvars.json for the k8s-training recipe (reference §4), recipe-aware.

The values and their order follow the original renderer. Two deliberate differences:
- the capacity-block reservation goes to `runtime_vars` (passed as TF_VAR_* by the bridge), never to the
  file, plan output or stdout, because a capacity block id is private;
- variables are emitted only when the recipe declares them. Dropping one is fine when its value is what
  the recipe would do anyway (a `false` toggle); when it would change the cluster (a reservation, MIG pins,
  a non-default mount tag), the recipe cannot honour the target and rendering fails with a RecipeError
  instead of silently deploying something else.
Identity (tenant, parent/project, region, subnet, token) is never rendered; it arrives as TF_VAR_*.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from npa_pulumi.errors import UserInputError
from npa_pulumi.plan.recipe_surface import RECIPE_VARIABLES, RUNTIME_VARIABLES, RecipeError
from npa_pulumi.plan.rtx_values import RtxOperatorValues, cluster_rtx_values
from npa_pulumi.plan.targets import ResolvedCluster, ResolvedPool, Target
from npa_pulumi.spec import constants as c


class RenderedTfvars(BaseModel):
    """`file_vars` is terraform.tfvars.json; `runtime_vars` go in as TF_VAR_* and are never written."""

    model_config = ConfigDict(frozen=True)

    file_vars: dict[str, Any]
    runtime_vars: dict[str, Any]
    # Variables this renderer would emit but the recipe does not declare, left out as harmless.
    omitted: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class _Variable:
    name: str
    value: Any
    # True when leaving it out (recipe does not declare it) keeps the cluster as the spec asks.
    droppable: bool = False


def render_tfvars(
    target: Target,
    recipe_variables: set[str] | None = None,
    ssh_public_key: str | None = None,
) -> RenderedTfvars:
    """Render one mk8s target's recipe variables. `recipe_variables` None means the full surface.

    Raises RecipeError when the recipe lacks a variable the target needs, UserInputError for a
    soperator target (it has no k8s-training tfvars).
    """
    if target.backend is not c.BackendKind.MK8S:
        raise UserInputError(
            f"{target.project_key}/{target.cluster_name} uses backend {target.backend.value!r}; tfvars are "
            "rendered "
            "for mk8s (k8s-training) targets only"
        )
    declared = set(RECIPE_VARIABLES) if recipe_variables is None else set(recipe_variables)
    variables = list(_variables(target.cluster, declared, ssh_public_key or ""))
    missing = [v.name for v in variables if v.name not in declared and not v.droppable]
    if missing:
        raise RecipeError(
            f"the recipe cannot honour {target.project_key}/{target.cluster_name}: it does not declare "
            f"variable(s) {', '.join(missing)}, which carry settings this cluster needs; use a recipe "
            "revision that declares them (e.g. the default recipe: upstream k8s-training with npa-pulumi's "
            "override files)"
        )
    file_vars: dict[str, Any] = {}
    runtime_vars: dict[str, Any] = {}
    omitted: list[str] = []
    for variable in variables:
        if variable.name not in declared:
            omitted.append(variable.name)
        elif variable.name in RUNTIME_VARIABLES:
            runtime_vars[variable.name] = variable.value
        else:
            file_vars[variable.name] = variable.value
    return RenderedTfvars(file_vars=file_vars, runtime_vars=runtime_vars, omitted=omitted)


def _variables(cluster: ResolvedCluster, declared: set[str], ssh_public_key: str) -> Iterable[_Variable]:
    gpu, cpu, mig = cluster.gpu_nodes, cluster.cpu_nodes, cluster.mig
    gpu_count, cpu_count = cluster.gpu_count(), cluster.cpu_count()

    yield _Variable("cluster_name", cluster.name)
    if cluster.k8s_version:
        yield _Variable("k8s_version", cluster.k8s_version)
    if ssh_public_key:
        yield _Variable("ssh_public_key", {"key": ssh_public_key})

    yield _Variable("mk8s_cluster_public_endpoint", True, droppable=True)
    for toggle in (
        "enable_k8s_node_group_sa",
        "enable_egress_gateway",
        "cpu_nodes_public_ips",
        "gpu_nodes_public_ips",
    ):
        yield _Variable(toggle, False, droppable=True)
    cpu_preemptible = bool(cpu and cpu.preemptible)
    yield _Variable("cpu_nodes_preemptible", cpu_preemptible, droppable=not cpu_preemptible)
    preemptible = bool(gpu and gpu.preemptible)
    yield _Variable("gpu_nodes_preemptible", preemptible, droppable=not preemptible)

    rtx = cluster_rtx_values(cluster)
    if rtx is not None and gpu is not None:
        yield _Variable("gpu_operator_rtx_driver_profile", _rtx_driver_profile(cluster, gpu, rtx))

    yield _Variable("mig_strategy", mig.strategy if mig else "none", droppable=mig is None)
    yield from _driver(cluster, gpu_count)
    yield _Variable("custom_driver", mig is not None, droppable=mig is None)
    if mig is not None:
        yield _Variable("mig_parted_config", mig.config)
        for name, version in mig.versions.items():
            yield _Variable(name, version)
        # RTX PRO Blackwell reconciles MIG geometry across a driver unload/reboot; its single-GPU preset
        # has no fabric, so the RDMA driver path stays off.
        yield _Variable("gpu_mig_with_reboot", True)
        yield _Variable("gpu_operator_rdma_enabled", False)

    yield _Variable("cpu_nodes_fixed_count", cpu_count)
    if cpu is not None and cpu_count > 0:
        yield _Variable("cpu_nodes_platform", cpu.platform)
        if cpu.preset:
            yield _Variable("cpu_nodes_preset", cpu.preset)
        yield _Variable("cpu_disk_size", str(cpu.disk_size_gib))

    yield _Variable("gpu_nodes_fixed_count_per_group", cluster.gpu_nodes_per_group)
    yield _Variable("gpu_node_groups", cluster.gpu_node_groups)
    if gpu is not None and gpu_count > 0:
        yield _Variable("gpu_nodes_platform", gpu.platform)
        if gpu.preset:
            yield _Variable("gpu_nodes_preset", gpu.preset)
        block = cluster.capacity_block_group_value()
        if block:
            # STRICT on purpose: AUTO may silently fall back to on-demand capacity.
            yield _Variable("gpu_nodes_reservation_policy", {"policy": "STRICT", "reservation_ids": [block]})
        yield _Variable("gpu_disk_size", str(gpu.disk_size_gib))

    yield from _pool_versions(cluster)
    yield from _gpu_cluster(cluster, declared)
    yield from _filestore(cluster)

    for toggle in (
        "enable_nebius_o11y_agent",
        "enable_grafana",
        "enable_prometheus",
        "collectK8sClusterMetrics",
    ):
        yield _Variable(toggle, False, droppable=True)
    # The recipe's own KubeRay (the vendor's privileged template) stays off: the fleet's cluster stack
    # installs its reviewed CPU template itself (components/kuberay.py).
    yield _Variable("enable_kuberay_cluster", False, droppable=True)
    yield _Variable("enable_kuberay_service", False, droppable=True)
    yield _Variable("enable_opa_gatekeeper", False, droppable=True)
    # loki has no default in the recipe, so it is always set when declared.
    yield _Variable("loki", {"enabled": False, "replication_factor": 1}, droppable=True)


def _rtx_driver_profile(
    cluster: ResolvedCluster, gpu: ResolvedPool, rtx: RtxOperatorValues
) -> dict[str, Any]:
    """The original's {platform, preset[, package_repositories]}, plus the operator values the profile
    pins (plan/rtx_values.py) and their revision, which a recipe puts where a change updates the
    release."""
    profile: dict[str, Any] = {"platform": gpu.platform, "preset": gpu.preset}
    if cluster.gpu_driver_package_repositories:
        profile["package_repositories"] = dict(cluster.gpu_driver_package_repositories)
    return {**profile, "values": rtx.helm_values(), "revision": rtx.revision()}


def _driver(cluster: ResolvedCluster, gpu_count: int) -> Iterable[_Variable]:
    """Driver inputs, only with GPUs: CPU-only clusters emit none (the strategy is inert there)."""
    if gpu_count <= 0:
        return
    managed = cluster.gpu_driver_mode == "managed-image"
    yield _Variable("gpu_nodes_driverfull_image", managed, droppable=not managed)
    if managed and cluster.managed_driver_preset:
        # Upstream recipes without this variable hardcode cuda13.0, so only another preset needs it.
        preset = cluster.managed_driver_preset
        yield _Variable(
            "gpu_nodes_driver_preset", preset, droppable=preset == c.DEFAULT_MANAGED_DRIVER_PRESET
        )


def _pool_versions(cluster: ResolvedCluster) -> Iterable[_Variable]:
    """A pinned pool's own version, only where it differs from the cluster's: the recipe's node groups take
    `k8s_version` otherwise (the default recipe's npa_fleet_versions_override.tf). Never droppable: a recipe
    without the variable would move the pinned pool with its control plane."""
    for variable, pool, count in (
        ("npa_fleet_cpu_nodes_version", cluster.cpu_nodes, cluster.cpu_count()),
        ("npa_fleet_gpu_nodes_version", cluster.gpu_nodes, cluster.gpu_count()),
    ):
        if pool is not None and count > 0 and pool.version and pool.version != cluster.k8s_version:
            yield _Variable(variable, pool.version)


def _gpu_cluster(cluster: ResolvedCluster, declared: set[str]) -> Iterable[_Variable]:
    if "enable_gpu_cluster" in declared:
        yield _Variable("enable_gpu_cluster", cluster.enable_gpu_cluster)
        if cluster.infiniband_fabric:
            yield _Variable("infiniband_fabric", cluster.infiniband_fabric)
        return
    # Recipes without `enable_gpu_cluster` (upstream V3+) cluster whenever the fabric is non-blank, and a
    # null fabric falls back to a region default; so "off" must be an explicit empty fabric.
    yield _Variable("enable_gpu_cluster", cluster.enable_gpu_cluster, droppable=True)
    yield _Variable(
        "infiniband_fabric",
        cluster.infiniband_fabric if cluster.enable_gpu_cluster else "",
        droppable=not cluster.enable_gpu_cluster,
    )


def _filestore(cluster: ResolvedCluster) -> Iterable[_Variable]:
    enabled = cluster.enable_filestore
    yield _Variable("enable_filestore", enabled, droppable=not enabled)
    # Always a string: the recipe's create branch tests `== ""`; null would read a filesystem with no id.
    yield _Variable(
        "existing_filestore", cluster.existing_filestore, droppable=not cluster.existing_filestore
    )
    yield _Variable(
        "filestore_disk_size_gibibytes", cluster.filestore_disk_size_gibibytes, droppable=not enabled
    )
    yield _Variable(
        "filestore_mount_path",
        cluster.filestore_mount_path,
        droppable=not enabled or cluster.filestore_mount_path == c.DEFAULT_FILESTORE_MOUNT_PATH,
    )
    yield _Variable(
        "filestore_mount_tag",
        cluster.filestore_mount_tag,
        droppable=not enabled or cluster.filestore_mount_tag == c.DEFAULT_FILESTORE_MOUNT_TAG,
    )
    repository = (
        cluster.filesystem_csi_chart_repository.get_secret_value()
        if cluster.filesystem_csi_chart_repository
        else ""
    )
    csi: dict[str, Any] = {"chart_repository": repository} if repository else {}
    csi |= {
        "chart_version": c.FILESYSTEM_CSI_CHART_VERSION,
        "namespace": c.FILESYSTEM_CSI_NAMESPACE,
        "make_default_storage_class": True,
        "previous_default_storage_class_name": c.FILESYSTEM_CSI_PREVIOUS_DEFAULT_SC,
    }
    yield _Variable("filesystem_csi", csi, droppable=not (enabled and repository))
