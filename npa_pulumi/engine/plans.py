"""From resolved spec targets to what the engine runs: project plans and cluster plans.

Everything here happens before the first mutation and touches no cloud: the fleet's own plans (projects,
their networks and object storage), each backend's recipe resolved once, and each cluster target planned by
its backend (engine/backends/: recipe materialization once per region, compatibility checks, tfvars). A
problem with any target stops the whole run here, listing every problem found.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from npa_pulumi.bridge.recipe import MaterializedRecipe
from npa_pulumi.bridge.versions import (
    TerraformRelease,
    TerraformVersionRefused,
    VersionConstraint,
    refusal,
    required_versions,
    terraform_release,
    unmet_constraints,
)
from npa_pulumi.engine.backends.base import ClusterBackend, PlanInputs, PlanSettings
from npa_pulumi.engine.programs import ClusterPlan, ProjectPlan, StoragePlan
from npa_pulumi.errors import UserInputError
from npa_pulumi.output.results import StackResult, StackStatus
from npa_pulumi.plan.cost import project_basis
from npa_pulumi.spec.constants import BackendKind

if TYPE_CHECKING:
    from npa_pulumi.plan import Target
    from npa_pulumi.spec import FleetSpec


class RecipeIncompatible(UserInputError):
    kind = "recipe-incompatible"


@dataclass(frozen=True)
class UnusedStorage:
    """A selected project with object storage whose selected clusters are all of backends that do not use
    it: its position in the spec, and those backends."""

    project_index: int
    backends: tuple[BackendKind, ...]


@dataclass
class FleetPlans:
    projects: list[ProjectPlan] = field(default_factory=list)
    clusters: list[ClusterPlan] = field(default_factory=list)
    unsupported: list[StackResult] = field(default_factory=list)
    # Selected projects that declare object storage none of their selected clusters uses: `up` and
    # `preview` refuse them (operations/common.refuse_unused_storage).
    unused_storage: list[UnusedStorage] = field(default_factory=list)
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
                    "status": StackStatus.NOT_DEPLOYABLE,
                    "error": f"{item.error}; `up` cannot deploy it: deploy the other clusters with "
                    "--only-clusters, or set `backend: mk8s` for this cluster",
                }
            )
            for item in self.unsupported
        ]


# What the local cloud's nodes get when the spec names no key and ~/.ssh has none (a public key: nothing to
# keep secret; the local cloud's nodes are kwok's and run no SSH daemon).
LOCAL_CLOUD_SSH_PUBLIC_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxvY2FsLWNsb3VkLW5vZGVzLWhhdmUtbm8tc3NoZAAA npa-local-cloud"
)


def default_ssh_public_key(spec: FleetSpec) -> str | None:
    if spec.ssh_public_key:
        return spec.ssh_public_key
    for name in ("id_ed25519.pub", "id_rsa.pub"):
        path = Path.home() / ".ssh" / name
        if path.is_file():
            return path.read_text().strip()
    return None


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
    plans = FleetPlans()
    ssh_key = default_ssh_public_key(spec)
    if options.cloud == "nebius" and not ssh_key and not for_destroy:
        raise UserInputError(
            "no SSH public key: set ssh_public_key in the spec or create ~/.ssh/id_ed25519.pub"
        )
    if not ssh_key and options.cloud == "local":
        # Upstream k8s-training refuses a plan without a key (its variable validation), and the local cloud's
        # nodes have no SSH daemon to log in to: a placeholder public key, never one of the user's.
        ssh_key = LOCAL_CLOUD_SSH_PUBLIC_KEY
    inputs = PlanInputs(tenant_id, ssh_key, in_cluster, in_cluster and options.health_gate)
    backends = {t.backend: backend for t in targets if (backend := backend_for(t.backend)) is not None}
    # Each backend's recipe is resolved once, before any target is planned (a branch to its commit); a
    # backend with no target in the selection may still check the recipe it was given.
    for kind in BackendKind:
        backend = backend_for(kind)
        source = None if backend is None else backend.recipe_source(options, selected=kind in backends)
        if source is not None:
            inputs.sources[kind] = source
    seen_projects: set[str] = set()
    missing_region = sorted({t.cluster_stack for t in targets if not t.region})
    if missing_region:
        raise UserInputError(
            f"no region for {', '.join(missing_region)}: set `region` in the spec or the project"
        )
    # A project stack (project, network, bucket) is only for projects with a deployable cluster in the
    # selection: preflight budgets nothing for the others, so nothing of theirs may be created.
    deployable = {t.project_key for t in targets if t.backend in backends}
    # Object storage serves the clusters of backends that use it: a project whose selected clusters are
    # all of other backends is refused it (the original tool failed closed too), deployable or not.
    storage_users = {
        t.project_key for t in targets if t.backend in backends and backends[t.backend].uses_object_storage
    }
    for target in targets:
        if target.project_key not in seen_projects:
            seen_projects.add(target.project_key)
            if target.object_storage is not None and target.project_key not in storage_users:
                kinds = dict.fromkeys(t.backend for t in targets if t.project_key == target.project_key)
                plans.unused_storage.append(UnusedStorage(target.project_index, tuple(kinds)))
            if target.project_key in deployable:
                plans.projects.append(_project_plan(target, tenant_id, options.create_projects))
        backend = backends.get(target.backend)
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
                    error=f"backend {target.backend.value!r} is planned and validated, but deploying it is "
                    f"not supported yet{untouched}",
                )
            )
            continue
        plans.clusters.append(backend.plan(target, inputs))
    staged = list(inputs.staged.values())
    plans.warnings = list(dict.fromkeys(w for recipe in staged for w in recipe.warnings))
    plans.terraform_constraints = list(dict.fromkeys(c for r in staged for c in _constraints(r)))
    if inputs.problems and not for_destroy:
        raise RecipeIncompatible(
            "the recipe cannot represent the requested clusters (nothing was changed):\n  - "
            + "\n  - ".join(inputs.problems)
        )
    return plans
