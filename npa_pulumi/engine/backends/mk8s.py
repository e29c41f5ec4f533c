"""The `mk8s` backend: Nebius Managed Kubernetes from the k8s-training recipe through the Terraform
bridge, the fleet's in-cluster stage and the GPU health gate."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from npa_pulumi.engine.backends.base import BackendKind, PlanInputs
from npa_pulumi.engine.lifecycle import validating_state
from npa_pulumi.engine.plans import mk8s_cluster_plan
from npa_pulumi.engine.programs import ClusterPlan, cluster_program

if TYPE_CHECKING:
    from npa_pulumi.plan import Target


class Mk8sBackend:
    kind = BackendKind.MK8S

    def plan(self, target: Target, inputs: PlanInputs) -> ClusterPlan:
        return mk8s_cluster_plan(target, inputs)

    def program(
        self,
        plan: ClusterPlan,
        cloud: str,
        profile: str,
        project_stack_ready: bool,
        fingerprint: str,
        adopted_state: str | None = None,
    ) -> Callable[[], None]:
        return cluster_program(plan, cloud, profile, project_stack_ready, fingerprint, adopted_state)

    def gate_state(self, plan: ClusterPlan) -> str:
        return "" if plan.health_gate is None else validating_state(plan.mig_enabled, plan.has_gpus)
