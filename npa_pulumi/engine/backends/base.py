"""The interface every cluster backend implements, and what planning hands it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from npa_pulumi.bridge.recipe import MaterializedRecipe, RecipeSource
    from npa_pulumi.engine.programs import ClusterPlan
    from npa_pulumi.plan import Target


class BackendKind(StrEnum):
    """The spec's `backend` vocabulary (npa_pulumi.plan.targets.Backend)."""

    MK8S = "mk8s"
    SOPERATOR = "soperator"


@dataclass
class PlanInputs:
    """What planning a target needs besides the target: resolved once per run, shared by every target."""

    tenant_id: str
    source: RecipeSource
    ssh_key: str | None
    in_cluster: bool
    health_gate: bool
    problems: list[str] = field(default_factory=list)  # the recipe's incompatibilities, per target
    staged: dict[str, MaterializedRecipe] = field(default_factory=dict)  # the recipe prepared per region
    # The soperator recipe (--soperator-recipe-dir/-ref, the local stand-in); None: no soperator target.
    soperator_source: RecipeSource | None = None
    soperator_staged: dict[str, MaterializedRecipe] = field(default_factory=dict)


class ClusterBackend(Protocol):
    """One target's backend: its plan (tfvars, recipe, gate settings), the program of its cluster stack,
    and the lifecycle state its gate reports while it runs. Status, drift, verification and destroy read
    what the stack recorded, the same for every Terraform-bridged backend."""

    kind: BackendKind

    def plan(self, target: Target, inputs: PlanInputs) -> ClusterPlan: ...

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
