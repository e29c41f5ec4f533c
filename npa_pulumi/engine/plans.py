"""From resolved spec targets to what the engine runs: project plans and cluster plans.

Everything here happens before the first mutation and touches no cloud: recipe materialization (once per
region, in a staging dir) and its compatibility checks, tfvars rendering, reading the recipe's filesystem
facts. A problem with any target
stops the whole run here, listing every problem found.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.bridge.recipe import (
    MaterializedRecipe,
    RecipeSource,
    compatibility_problems,
    materialize,
    pin_source,
    resolve_source,
)
from npa_pulumi.bridge.versions import (
    TerraformRelease,
    TerraformVersionRefused,
    VersionConstraint,
    refusal,
    required_versions,
    terraform_release,
    unmet_constraints,
)
from npa_pulumi.engine.backends.base import ClusterBackend, PlanInputs
from npa_pulumi.engine.programs import ClusterPlan, ProjectPlan, StoragePlan
from npa_pulumi.engine.requests import Recipes
from npa_pulumi.errors import UserInputError
from npa_pulumi.kube.gpu_health.config import GateConfig
from npa_pulumi.output.results import StackResult
from npa_pulumi.plan.cost import cluster_basis, project_basis
from npa_pulumi.plan.rtx_values import cluster_rtx_values
from npa_pulumi.runtime.home import npa_home
from npa_pulumi.runtime.presets import gpus_per_node
from npa_pulumi.spec.constants import MIG_RESOURCES_PER_GPU, MIG_TOOLKIT_VERSION, RTX_RENDERING_PROFILE

if TYPE_CHECKING:
    from npa_pulumi.plan import Target
    from npa_pulumi.spec import FleetSpec


class RecipeIncompatible(UserInputError):
    kind = "recipe-incompatible"


@dataclass
class FleetPlans:
    projects: list[ProjectPlan] = field(default_factory=list)
    clusters: list[ClusterPlan] = field(default_factory=list)
    unsupported: list[StackResult] = field(default_factory=list)
    recipe: RecipeSource | None = None
    # Spec indexes of selected projects with no mk8s cluster that declare object storage: `up` and
    # `preview` refuse them (Fleet.refuse_storage_without_mk8s).
    storage_without_mk8s: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # from preparing the recipe, e.g. an unpointed domain
    # Every `required_version` of the recipe's modules (bridge/versions.py): `require_recipe_terraform`
    # checks the binary that will run against them before anything mutates.
    terraform_constraints: list[VersionConstraint] = field(default_factory=list)
    _cluster_index: tuple[int, dict[str, ClusterPlan]] = field(
        default_factory=lambda: (-1, {}), init=False, repr=False, compare=False
    )

    def project(self, key: str) -> ProjectPlan:
        return next(p for p in self.projects if p.project_key == key)

    def cluster(self, stack: str) -> ClusterPlan:
        """The plan of a cluster stack, by name (an index: asked once per stack of a 10,000-stack fleet);
        StopIteration when the plans have none of that name."""
        indexed, index = self._cluster_index
        if indexed != len(self.clusters):  # built once the plans are complete (they are only appended to)
            index = {c.stack: c for c in self.clusters}
            self._cluster_index = (len(self.clusters), index)
        found = index.get(stack)
        return found if found is not None else next(c for c in self.clusters if c.stack == stack)

    def undeployable(self) -> list[StackResult]:
        """What `up` reports for the targets whose backend this version cannot deploy: a failure (exit 1)
        that says why and what to do, never a line in a run that otherwise succeeds."""
        return [
            item.model_copy(
                update={
                    "status": "not-deployable",
                    "error": f"{item.error}; `up` cannot deploy it: deploy the other clusters with "
                    "--only-clusters, or set `backend: mk8s` for this cluster",
                }
            )
            for item in self.unsupported
        ]


def default_ssh_public_key(spec: FleetSpec) -> str | None:
    if spec.ssh_public_key:
        return spec.ssh_public_key
    for name in ("id_ed25519.pub", "id_rsa.pub"):
        path = Path.home() / ".ssh" / name
        if path.is_file():
            return path.read_text().strip()
    return None


def resolve_facts(facts: dict[str, Any], tfvars: dict[str, Any]) -> dict[str, Any]:
    """Replace `${var.NAME}` references the recipe left in its filesystem facts with the applied values."""

    def resolve(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, str) and value.startswith("${var.") and value.endswith("}"):
            name = value[len("${var.") : -1]
            return tfvars.get(name, value)
        return value

    resolved: dict[str, Any] = resolve(facts)
    return resolved


def _storage_plan(target: Target) -> StoragePlan | None:
    storage = target.object_storage
    if storage is None:
        return None
    return StoragePlan(
        storage_class=storage.storage_class,
        size_gibibytes=storage.size_gibibytes,
        bucket_name=storage.bucket_name or "",
    )


def _project_plan(target: Target, tenant_id: str, create_missing: bool) -> ProjectPlan:
    return ProjectPlan(
        fleet=target.fleet,
        project_key=target.project_key,
        display_name=target.display_name,
        project_id=target.project_id,
        region=target.region,
        tenant_id=tenant_id,
        stack=target.project_stack,
        object_storage=_storage_plan(target),
        create_missing=create_missing,
        cost_basis=project_basis(target).to_output(),
    )


def _staged(source: RecipeSource, region: str, staged: dict[str, MaterializedRecipe]) -> MaterializedRecipe:
    """The recipe prepared for `region`, once per planning run, in a staging dir of its own.

    Planning needs only the prepared recipe's digest, variables and filesystem facts, which are the same
    for every cluster of a region; the Terraform bridge materializes into each stack's work dir itself when
    it applies (and checks the digest against this one). So planning a 1,000-cluster fleet prepares the
    recipe once instead of copying it into 1,000 work dirs, and never touches a work dir another run's
    terraform may be using."""
    if region not in staged:
        key = hashlib.sha256(f"{source.kind}\0{source.location}\0{region}".encode()).hexdigest()[:16]
        root = npa_home() / "cache" / "staged" / key
        staged[region] = materialize(source, root, region, npa_home() / "cache")
    return staged[region]


def mk8s_cluster_plan(target: Target, inputs: PlanInputs) -> ClusterPlan:
    """One mk8s target's plan: the k8s-training recipe's tfvars, its facts and the gate's settings; the
    recipe's incompatibilities go to `inputs.problems` (engine/backends/mk8s.py)."""
    from npa_pulumi.plan import render_tfvars

    tenant_id, source, ssh_key = inputs.tenant_id, inputs.source, inputs.ssh_key
    problems, staged, in_cluster, health_gate = (
        inputs.problems,
        inputs.staged,
        inputs.in_cluster,
        inputs.health_gate,
    )
    cluster = target.cluster
    recipe = _staged(source, target.region, staged)
    mig = cluster.mig is not None
    found = compatibility_problems(
        recipe.variables,
        mig=mig,
        rtx_profile=cluster.gpu_workload_profile == "rtx-rendering",
        managed_image=cluster.gpu_count() > 0 and cluster.gpu_driver_mode == "managed-image",
    )
    problems.extend(f"{target.cluster_stack}: {p}" for p in found)
    rendered = render_tfvars(target, recipe.variables, ssh_key)
    return ClusterPlan(
        fleet=target.fleet,
        project_key=target.project_key,
        project_stack=target.project_stack,
        cluster_name=target.cluster_name,
        stack=target.cluster_stack,
        region=target.region,
        tenant_id=tenant_id,
        backend=target.backend,
        subnet_id=cluster.subnet_id or "",
        tfvars=rendered.file_vars,
        runtime_tfvars=rendered.runtime_vars,
        recipe={**source.to_dict(), "digest": recipe.digest},
        recipe_facts=resolve_facts(recipe.facts, rendered.file_vars),
        capacity_block_group=cluster.capacity_block_group_value(),
        gpu_driver_mode=cluster.gpu_driver_mode,
        allow_unsafe_nvswitch_operator=cluster.allow_unsafe_nvswitch_operator,
        nvswitch_topology=cluster.nvswitch_topology,
        mig_enabled=mig,
        has_gpus=cluster.gpu_count() > 0,
        in_cluster=in_cluster,
        health_gate=health_gate_config(cluster) if health_gate else None,
        fabric_check=fabric_check_config(cluster) if health_gate and cluster.gpu_count() > 0 else None,
        kuberay=kuberay_template(cluster),
        rtx_driver_repositories=(
            dict(cluster.gpu_driver_package_repositories)
            if cluster.gpu_workload_profile == RTX_RENDERING_PROFILE and cluster.gpu_count() > 0
            else None
        ),
        rtx_values_revision=_rtx_values_revision(cluster),
        cost_basis=cluster_basis(target).to_output(),
    )


def _constraints(recipe: MaterializedRecipe) -> list[VersionConstraint]:
    return required_versions([recipe.module_dir, *([recipe.modules_dir] if recipe.modules_dir else [])])


def require_recipe_terraform(plans: FleetPlans) -> TerraformRelease | None:
    """The terraform/tofu that will run this plan's cluster stacks, refused (TerraformVersionRefused)
    when it does not meet the recipe's own `required_version` constraints: `up`, `preview` and `destroy`
    call it before their first mutation, so a too-old binary never leaves project stacks half-applied.
    None when no cluster stack of the selection runs terraform."""
    from npa_pulumi.runtime.toolchain import find_terraform

    if not plans.clusters:
        return None
    release = terraform_release(find_terraform())
    unmet = unmet_constraints(plans.terraform_constraints, release)
    if unmet:
        raise TerraformVersionRefused(refusal(unmet, release))
    return release


def kuberay_template(cluster: Any) -> dict[str, Any] | None:
    """The fleet's KubeRay template for a cluster with `kuberay.enabled` (npa_pulumi.kube.kuberay)."""
    from npa_pulumi.kube.kuberay import RayTemplate, cpu_node_group_name
    from npa_pulumi.spec.constants import KUBERAY_OPERATOR_IMAGE

    ray = cluster.kuberay
    if ray is None:
        return None
    return RayTemplate(
        worker_replicas=ray.worker_replicas,
        worker_cpus=ray.worker_cpus,
        worker_memory_gib=ray.worker_memory_gib,
        ray_version=ray.ray_version,
        image=ray.image,
        operator_image=KUBERAY_OPERATOR_IMAGE,
        cpu_node_group=cpu_node_group_name(cluster.name),
    ).to_json()


def mig_version_pins(versions: dict[str, str]) -> dict[str, str]:
    """The spec's MIG pins (`gpu_operator_version`, ...) under the names the gate checks them by
    (npa_pulumi.kube.gpu_health.mig.MIG_PINNED_COMPONENTS), plus the container toolkit of that release."""
    pins = {name.removeprefix("gpu_").removesuffix("_version"): v for name, v in versions.items()}
    return {**pins, "toolkit": MIG_TOOLKIT_VERSION}


def health_gate_config(cluster: Any) -> GateConfig:
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


def _rtx_values_revision(cluster: Any) -> str:
    """The RTX operator values' revision ("" without the profile or GPUs): the gate re-runs when it
    changes, as the driver pods roll."""
    values = cluster_rtx_values(cluster) if cluster.gpu_count() > 0 else None
    return values.revision() if values is not None else ""


def _rtx_repository_check(cluster: Any, has_gpus: bool) -> tuple[str, dict[str, str]] | None:
    """The gate's repository-mount check of an RTX cluster with package repositories: the ConfigMap and
    each file's SHA-256 (never the sources themselves: the gate's settings are kept in stack state)."""
    values = cluster_rtx_values(cluster) if has_gpus else None
    if values is None or not values.repo_config_map:
        return None
    return values.repo_config_map, dict(values.repositories)


def fabric_check_config(cluster: Any) -> dict[str, Any]:
    """The fabric check's settings for one cluster (npa_pulumi.kube.fabric_check.FabricConfig)."""
    fabric = cluster.fabric_check
    return {
        "gpus_per_node": gpus_per_node(cluster.gpu_nodes.preset) if cluster.gpu_nodes is not None else 0,
        "expected_gpu_nodes": cluster.gpu_count(),
        "intra_node": fabric.intra_node,
        "inter_node": fabric.inter_node,
        "intra_min_busbw_gbps": float(fabric.intra_node_min_busbw_gbps),
        "inter_min_busbw_gbps": float(fabric.inter_node_min_busbw_gbps),
        "threshold_source": fabric.threshold_source,
        "min_bytes": fabric.min_bytes,
        "max_bytes": fabric.max_bytes,
        "step_factor": fabric.step_factor,
        "timeout_s": float(fabric.timeout_minutes * 60),
        "not_applicable": fabric.not_applicable,
        "inter_not_applicable": fabric.inter_not_applicable,
    }


@dataclass(frozen=True)
class PlanSettings:
    """What of a request planning reads: the cloud adapter, the recipes, whether the cluster programs run
    the health gate and whether a missing named project is created."""

    cloud: str = "local"
    recipes: Recipes = field(default_factory=Recipes)
    health_gate: bool = True
    create_projects: bool = True


def build_plans(
    spec: FleetSpec,
    targets: Sequence[Target],
    options: PlanSettings,
    tenant_id: str,
    in_cluster: bool = True,
    for_destroy: bool = False,
    backend_for: Callable[[str], ClusterBackend | None] = lambda _kind: None,
) -> FleetPlans:
    """`for_destroy`: plans that only name what a destroy deletes. A destroy runs no stack's program, so it
    needs no SSH key and no recipe that can represent the clusters (the stacks hold what they deployed).
    `backend_for`: the backend that plans a target of a kind (engine/backends/registry.py); a target of a
    kind it names none for is listed in `unsupported`."""
    health_gate = in_cluster and options.health_gate
    plans = FleetPlans()
    # A branch is resolved to its commit now, once: every stack of this run applies that commit.
    # A selection without mk8s targets needs no k8s-training recipe (a soperator-only fleet on Nebius).
    needs_k8s_training = (
        any(t.backend == "mk8s" for t in targets)
        or bool(options.recipes.recipe_dir or options.recipes.recipe_ref)
        or options.cloud == "local"
    )
    source = (
        pin_source(
            resolve_source(options.cloud, options.recipes.recipe_dir, options.recipes.recipe_ref),
            npa_home() / "cache",
        )
        if needs_k8s_training
        else RecipeSource("dir", "")  # never materialized: no target plans with it
    )
    plans.recipe = source
    ssh_key = default_ssh_public_key(spec)
    if options.cloud == "nebius" and not ssh_key and not for_destroy:
        raise UserInputError(
            "no SSH public key: set ssh_public_key in the spec or create ~/.ssh/id_ed25519.pub"
        )
    inputs = PlanInputs(tenant_id, source, ssh_key, in_cluster, health_gate)
    if any(t.backend == "soperator" and backend_for(t.backend) is not None for t in targets):
        from npa_pulumi.bridge import soperator_recipe

        inputs.soperator_source = pin_source(
            soperator_recipe.resolve_source(
                options.cloud, options.recipes.soperator_recipe_dir, options.recipes.soperator_recipe_ref
            ),
            npa_home() / "cache",
        )
    seen_projects: set[str] = set()
    missing_region = sorted({t.cluster_stack for t in targets if not t.region})
    if missing_region:
        raise UserInputError(
            f"no region for {', '.join(missing_region)}: set `region` in the spec or the project"
        )
    # A project stack (project, network, bucket) is only for projects with a deployable cluster in the
    # selection: preflight budgets nothing for the others, so nothing of theirs may be created.
    deployable = {t.project_key for t in targets if backend_for(t.backend) is not None}
    # Object storage serves mk8s clusters: a project whose selected clusters are all soperator is refused
    # it (the original tool failed closed too), deployable or not.
    with_mk8s = {t.project_key for t in targets if t.backend == "mk8s" and backend_for(t.backend) is not None}
    for target in targets:
        if target.project_key not in seen_projects:
            seen_projects.add(target.project_key)
            if target.object_storage is not None and target.project_key not in with_mk8s:
                plans.storage_without_mk8s.append(target.project_index)
            if target.project_key in deployable:
                plans.projects.append(_project_plan(target, tenant_id, options.create_projects))
        backend = backend_for(target.backend)
        if backend is None:
            untouched = "" if target.project_key in deployable else "; its project was not touched"
            plans.unsupported.append(
                StackResult(
                    stack=target.cluster_stack,
                    kind="cluster",
                    project_key=target.project_key,
                    cluster_name=target.cluster_name,
                    status="not-supported",
                    backend=target.backend,
                    error=f"backend {target.backend!r} is planned and validated, but deploying it is not "
                    f"supported yet{untouched}",
                )
            )
            continue
        plans.clusters.append(backend.plan(target, inputs))
    staged = [*inputs.staged.values(), *inputs.soperator_staged.values()]
    plans.warnings = list(dict.fromkeys(w for recipe in staged for w in recipe.warnings))
    plans.terraform_constraints = list(dict.fromkeys(c for r in staged for c in _constraints(r)))
    if inputs.problems and not for_destroy:
        raise RecipeIncompatible(
            "the recipe cannot represent the requested clusters (nothing was changed):\n  - "
            + "\n  - ".join(inputs.problems)
        )
    return plans
