"""The inline Pulumi program of a soperator cluster stack: the soperator recipe through the Terraform
bridge, the cluster's credentials and the fleet's own objects, then the Slurm gate (components/
slurm_gate.py). Its outputs are those of every cluster stack (cluster_id, endpoint, node_group_ids,
kube_context, live_objects, lifecycle, validation, health_evidence), plus `backend`, `filestores`,
`slurm_cluster` and the `slurm_status` the gate last saw."""

from __future__ import annotations

from collections.abc import Callable

from npa_pulumi.engine.programs import (
    ClusterPlan,
    cluster_module_args,
    export_ungated,
    in_cluster_stage,
    project_identity,
)
from npa_pulumi.spec.constants import BackendKind


def soperator_program(
    plan: ClusterPlan, cloud: str, profile: str, project_stack_ready: bool, fingerprint: str
) -> Callable[[], None]:
    if plan.in_cluster:
        import npa_pulumi.components.in_cluster  # noqa: F401  (see backends/mk8s/program.py)

    def program() -> None:
        import pulumi

        from npa_pulumi.components import SoperatorCluster, SoperatorClusterArgs
        from npa_pulumi.engine.fingerprint import FINGERPRINT_OUTPUT

        project_id, subnet_id = project_identity(plan, project_stack_ready)
        cluster = SoperatorCluster(
            plan.cluster_name,
            SoperatorClusterArgs(**cluster_module_args(plan, cloud, profile, project_id, subnet_id)),
        )
        pulumi.export("backend", BackendKind.SOPERATOR.value)
        pulumi.export("project_id", project_id)
        pulumi.export("subnet_id", subnet_id)
        pulumi.export(FINGERPRINT_OUTPUT, fingerprint)
        pulumi.export("cluster_id", cluster.cluster_id)
        pulumi.export("endpoint", cluster.endpoint)
        pulumi.export("node_group_ids", cluster.node_group_ids)
        pulumi.export("filestores", cluster.filestores)
        pulumi.export("slurm_cluster", cluster.slurm_cluster)
        pulumi.export("kube_context", cluster.kube_context)
        pulumi.export("live_objects", cluster.live_objects)
        gated = False
        if plan.in_cluster:
            stage = in_cluster_stage(plan, cloud, profile, cluster)
            if plan.slurm is not None:
                from npa_pulumi.components import SlurmGate, SlurmGateArgs

                gate = SlurmGate(
                    f"{plan.cluster_name}-slurm",
                    SlurmGateArgs(
                        **stage.gate_args,
                        server=stage.credentials.server,
                        slurm=plan.slurm,
                        gate=plan.health_gate,
                    ),
                    pulumi.ResourceOptions(parent=cluster, depends_on=[stage.objects]),
                )
                pulumi.export("lifecycle", gate.lifecycle)
                pulumi.export("validation", "slurm")
                pulumi.export("health_evidence", gate.evidence)
                pulumi.export("slurm_status", gate.slurm_status)
                gated = True
        if not gated:
            export_ungated()

    return program
