"""The `mk8s` backend: Nebius Managed Kubernetes from the k8s-training recipe through the Terraform
bridge, the fleet's in-cluster stage and the GPU health gate (with the fabric check and, for KubeRay
clusters, the Ray gate); preflight charges the spec's node pools, proven against the live inventory."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.backends.base import NativeStatus, PlanInputs
from npa_pulumi.engine.backends.mk8s import plan as planning
from npa_pulumi.engine.backends.mk8s import status
from npa_pulumi.engine.backends.mk8s.program import cluster_program
from npa_pulumi.engine.lifecycle import validating_state
from npa_pulumi.spec.constants import BackendKind

if TYPE_CHECKING:
    from npa_pulumi.bridge.recipe import RecipeSource
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.engine.backends.base import PlanSettings
    from npa_pulumi.engine.health.remediation import WorkloadManager
    from npa_pulumi.engine.programs import ClusterPlan
    from npa_pulumi.plan import Target
    from npa_pulumi.preflight.demand import ClusterDemandInput
    from npa_pulumi.preflight.live_proof import ClaimedCluster
    from npa_pulumi.preflight.targets import DeployedLedger


class Mk8sBackend:
    kind = BackendKind.MK8S
    uses_object_storage = True
    adoptable = True
    claims_need_same_plan = False  # its node groups are matched against the spec itself
    gate_type = ""  # the GPU health gate is its gate
    workload_manager: WorkloadManager | None = None  # Kubernetes schedules its nodes

    def expected_gpu_nodes(self, target: Target) -> int:
        return target.cluster.gpu_count()

    def recipe_source(self, options: PlanSettings, selected: bool) -> RecipeSource | None:
        return planning.recipe_source(options, selected)

    def plan(self, target: Target, inputs: PlanInputs) -> ClusterPlan:
        return planning.mk8s_cluster_plan(target, inputs)

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

    def preflight_demand(
        self,
        cloud: CloudPort,
        tenant_id: str,
        target: Target,
        claim: ClaimedCluster | None,
        ledger: DeployedLedger,
    ) -> ClusterDemandInput:
        from npa_pulumi.preflight.targets import pool_demand

        return pool_demand(cloud, tenant_id, target, claim, ledger)

    def native_status(self, cloud: CloudPort, plan: ClusterPlan, outputs: Mapping[str, Any]) -> NativeStatus:
        return status.native_status(cloud, plan, outputs)

    def recorded_status(self, outputs: Mapping[str, Any]) -> NativeStatus:
        return status.recorded_status(outputs)


BACKEND = Mk8sBackend()  # what engine/backends/registry.py finds
