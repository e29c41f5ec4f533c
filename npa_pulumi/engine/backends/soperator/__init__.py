"""The `soperator` backend: a Slurm-on-Kubernetes cluster (Nebius' soperator) from the soperator recipe
through the same Terraform bridge as mk8s, one cluster stack per target, gated on the Slurm cluster being
usable: the SlurmCluster `Available`, every NodeSet `Ready` at its size, and the GPU health gate on the
GPU workers. Preflight charges the recipe's node groups (npa_pulumi/preflight/soperator_demand.py); its
native status is the Slurm cluster's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.backends.base import NativeStatus, PlanInputs
from npa_pulumi.engine.backends.soperator import plan as planning
from npa_pulumi.engine.backends.soperator import status
from npa_pulumi.engine.health.remediation import WorkloadManager
from npa_pulumi.errors import NpaError
from npa_pulumi.plan.gates import health_gate_config
from npa_pulumi.spec.constants import BackendKind

if TYPE_CHECKING:
    from npa_pulumi.bridge.recipe import RecipeSource
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.engine.backends.base import PlanSettings
    from npa_pulumi.engine.programs import ClusterPlan
    from npa_pulumi.plan import Target
    from npa_pulumi.preflight.demand import SoperatorDemandInput
    from npa_pulumi.preflight.live_proof import ClaimedCluster
    from npa_pulumi.preflight.targets import DeployedLedger


# Slurm owns a soperator cluster's workers. soperator takes and reports a Slurm drain through the Kubernetes
# node's `SlurmNodeDrain` condition (its consts: set True with reason NodeNeedDrain, its controllers drain
# the node's Slurm nodes with a reason, the reason becomes NodeDraining while jobs still run on them and
# NodeDrained once none does). The ladder drains through it, and never touches a node still draining
# (DRAIN+ALLOC: a job runs); a disruptive `up` drains every worker through it and waits for NodeDrained.
SLURM = WorkloadManager(
    name="Slurm",
    drain="slurm drain (reason: {reason})",
    busy_states=(frozenset({"DRAIN", "ALLOC"}), frozenset({"DRAINING"})),
    condition="SlurmNodeDrain",
    request="NodeNeedDrain",
    states={"NodeNeedDrain": "DRAINING", "NodeDraining": "DRAIN+ALLOC", "NodeDrained": "DRAIN+IDLE"},
    drained_states=(frozenset({"DRAIN", "IDLE"}),),
    released="NodeUndrained",
    workers="slurm.nebius.ai/node-role=worker",  # the recipe's worker node groups (NodeSets' nodes)
)


class SoperatorBackend:
    kind = BackendKind.SOPERATOR
    uses_object_storage = False  # the fleet's object storage serves mk8s clusters
    adoptable = False
    # Its node groups are the recipe's, not matched against the spec: a deployed cluster is held only when
    # its stack was deployed from the current plan.
    claims_need_same_plan = True
    gate_type = ":SlurmGate"  # components/slurm_gate.py
    workload_manager: WorkloadManager | None = SLURM

    def expected_gpu_nodes(self, target: Target) -> int:
        return health_gate_config(target.cluster).expected_gpu_nodes

    def recipe_source(self, options: PlanSettings, selected: bool) -> RecipeSource | None:
        return planning.recipe_source(options, selected)

    def plan(self, target: Target, inputs: PlanInputs) -> ClusterPlan:
        return planning.soperator_cluster_plan(target, inputs)

    def program(
        self,
        plan: ClusterPlan,
        cloud: str,
        profile: str,
        project_stack_ready: bool,
        fingerprint: str,
        adopted_state: str | None = None,
    ) -> Callable[[], None]:
        from npa_pulumi.engine.backends.soperator.program import soperator_program

        if adopted_state is not None:  # `adopt` refuses soperator targets before any program is built
            raise NpaError(f"{plan.stack}: adopting a soperator cluster is not supported")

        return soperator_program(plan, cloud, profile, project_stack_ready, fingerprint)

    def gate_state(self, plan: ClusterPlan) -> str:
        return "" if plan.backend_gate is None else planning.GATE_STATE

    def preflight_demand(
        self,
        cloud: CloudPort,
        tenant_id: str,
        target: Target,
        claim: ClaimedCluster | None,
        ledger: DeployedLedger,
    ) -> SoperatorDemandInput:
        from npa_pulumi.preflight.targets import soperator_cluster_demand

        return soperator_cluster_demand(cloud, tenant_id, target, claim, ledger)

    def native_status(self, cloud: CloudPort, plan: ClusterPlan, outputs: Mapping[str, Any]) -> NativeStatus:
        return status.native_status(cloud, outputs)

    def recorded_status(self, outputs: Mapping[str, Any]) -> NativeStatus:
        return status.recorded_status(outputs)


BACKEND = SoperatorBackend()  # what engine/backends/registry.py finds
