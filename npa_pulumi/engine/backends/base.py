"""The interface every cluster backend implements, and what planning hands it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from npa_pulumi.engine.requests import Recipes
from npa_pulumi.spec.constants import BackendKind

if TYPE_CHECKING:
    from npa_pulumi.bridge.recipe import MaterializedRecipe, RecipeSource
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.engine.health.remediation import WorkloadManager
    from npa_pulumi.engine.programs import ClusterPlan
    from npa_pulumi.plan import Target
    from npa_pulumi.preflight.live_proof import ClaimedCluster
    from npa_pulumi.preflight.targets import DemandInput, DeployedLedger

__all__ = ["BackendKind", "ClusterBackend", "NativeStatus", "PlanInputs"]


@dataclass(frozen=True)
class PlanSettings:
    """What of a request planning reads: the cloud adapter, the recipes, whether the cluster programs run
    the health gate and whether a missing named project is created."""

    cloud: str = "local"
    recipes: Recipes = field(default_factory=Recipes)
    health_gate: bool = True
    create_projects: bool = True


@dataclass
class PlanInputs:
    """What planning a target needs besides the target: resolved once per run, shared by every target."""

    tenant_id: str
    ssh_key: str | None
    in_cluster: bool
    health_gate: bool
    # Each backend's recipe for this run, resolved and pinned once (ClusterBackend.recipe_source).
    sources: dict[BackendKind, RecipeSource] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # the recipes' incompatibilities, per target
    # Each backend's recipe prepared per region, once per planning run.
    staged: dict[tuple[BackendKind, str], MaterializedRecipe] = field(default_factory=dict)

    def recipe(
        self,
        kind: BackendKind,
        region: str,
        prepare: Callable[[RecipeSource, str], MaterializedRecipe],
    ) -> tuple[RecipeSource, MaterializedRecipe]:
        """The backend's recipe source and the recipe prepared for `region` (by `prepare` the first time)."""
        source = self.sources.get(kind)
        assert source is not None, f"build_plans resolves the {kind} recipe for {kind} targets"
        if (kind, region) not in self.staged:
            self.staged[kind, region] = prepare(source, region)
        return source, self.staged[kind, region]


@dataclass(frozen=True)
class NativeStatus:
    """What a backend's own view of a cluster adds to its result: StackResult fields by name (the
    backend's own, e.g. a KubeRay cluster's Ray readiness as `kuberay`); None where it saw nothing."""

    fields: Mapping[str, dict[str, Any] | None] = field(default_factory=dict)

    def seen(self) -> dict[str, dict[str, Any]]:
        """The fields it saw something for, to set on the cluster's result."""
        return {name: value for name, value in self.fields.items() if value is not None}


class ClusterBackend(Protocol):
    """One target's backend: its recipe, its plan (tfvars, recipe, gate settings), the program of its
    cluster stack, the lifecycle state its gate reports while it runs, what preflight charges for it and
    its native status. Drift, verification and destroy read what the stack recorded, the same for every
    Terraform-bridged backend."""

    kind: BackendKind
    # Whether its clusters use their project's object storage: a project whose selected clusters are all
    # of backends that do not is refused its object storage (engine/operations/common.py).
    uses_object_storage: bool
    # Whether `adopt` takes over its clusters from the original tool's Terraform (`program(adopted_state)`).
    adoptable: bool
    # Whether preflight's live proof of a deployed cluster needs its stack deployed from the current plan
    # (ClaimedCluster.same_plan): only then is the plan built to compare fingerprints.
    claims_need_same_plan: bool
    # The component type (`:<Type>`) of its own gate step, if it has one beside the GPU health gate: its
    # start records `gate_state` (engine/automation/stack_state.py), and a trace shows it as a step.
    gate_type: str
    # The workload manager that owns its nodes above Kubernetes, if any: the repair ladder takes a node out
    # of service through it and never touches one running a job (engine/health/remediation.py).
    workload_manager: WorkloadManager | None

    def expected_gpu_nodes(self, target: Target) -> int:
        """How many GPU nodes a cluster of this backend has when whole (the repair ladder's breakers)."""
        ...

    def recipe_source(self, options: PlanSettings, selected: bool) -> RecipeSource | None:
        """The recipe its clusters are deployed from in this run, resolved and pinned (a branch to its
        commit); `selected`: whether the selection has a target of this backend. None: the run needs none."""
        ...

    def plan(self, target: Target, inputs: PlanInputs) -> ClusterPlan:
        """The target's plan; the recipe's incompatibilities go to `inputs.problems`."""
        ...

    def program(
        self,
        plan: ClusterPlan,
        cloud: str,
        profile: str,
        project_stack_ready: bool,
        fingerprint: str,
        adopted_state: str | None = None,
    ) -> Callable[[], None]:
        """`adopted_state`: the program of `adopt`, taking over a cluster another tool's Terraform
        deployed (components/terraform_module.py); a backend that cannot adopt raises."""
        ...

    def gate_state(self, plan: ClusterPlan) -> str:
        """The lifecycle state recorded while the cluster's gate runs ("" when no gate runs)."""
        ...

    def preflight_demand(
        self,
        cloud: CloudPort,
        tenant_id: str,
        target: Target,
        claim: ClaimedCluster | None,
        ledger: DeployedLedger,
    ) -> DemandInput:
        """What preflight charges for the target (npa_pulumi/preflight/targets.py): in full, or for a
        deployed cluster (`claim`) what its live proof leaves, said in `ledger`."""
        ...

    def native_status(self, cloud: CloudPort, plan: ClusterPlan, outputs: Mapping[str, Any]) -> NativeStatus:
        """`status`: the cluster's own status, read live from its API where it answers, else as its stack
        recorded it."""
        ...

    def recorded_status(self, outputs: Mapping[str, Any]) -> NativeStatus:
        """`up`: the cluster's own status as its gate recorded it in the stack."""
        ...
