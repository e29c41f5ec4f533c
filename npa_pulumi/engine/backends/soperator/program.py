"""The inline Pulumi program of a soperator cluster stack: the soperator recipe through the Terraform
bridge, the cluster's credentials and the fleet's own objects, then the Slurm gate (components/
slurm_gate.py). Its outputs are those of every cluster stack (cluster_id, endpoint, node_group_ids,
kube_context, live_objects, lifecycle, validation, health_evidence), plus `backend`, `filestores`,
`slurm_cluster` and the `slurm_status` the gate last saw."""

from __future__ import annotations

from collections.abc import Callable

from npa_pulumi.engine.backends.soperator.outputs import SoperatorOutputs
from npa_pulumi.engine.programs import (
    ClusterPlan,
    cluster_module_args,
    export,
    export_ungated,
    in_cluster_stage,
    project_identity,
)
from npa_pulumi.kube.slurm_check import SlurmGateConfig
from npa_pulumi.spec.constants import BackendKind


def soperator_program(
    plan: ClusterPlan, cloud: str, profile: str, project_stack_ready: bool, fingerprint: str
) -> Callable[[], None]:
    if plan.in_cluster:
        import npa_pulumi.components.in_cluster  # noqa: F401  (see backends/mk8s/program.py)

    def program() -> None:
        import pulumi

        from npa_pulumi.components import SoperatorCluster, SoperatorClusterArgs

        project_id, subnet_id = project_identity(plan, project_stack_ready)
        cluster = SoperatorCluster(
            plan.cluster_name,
            SoperatorClusterArgs(**cluster_module_args(plan, cloud, profile, project_id, subnet_id)),
        )
        export(
            SoperatorOutputs,
            backend=BackendKind.SOPERATOR.value,
            project_id=project_id,
            subnet_id=subnet_id,
            npa_fingerprint=fingerprint,
            cluster_id=cluster.cluster_id,
            endpoint=cluster.endpoint,
            node_group_ids=cluster.node_group_ids,
            filestores=cluster.filestores,
            slurm_cluster=cluster.slurm_cluster,
            kube_context=cluster.kube_context,
            live_objects=cluster.live_objects,
        )
        gated = False
        if plan.in_cluster:
            stage = in_cluster_stage(plan, cloud, profile, cluster)
            if isinstance(plan.backend_gate, SlurmGateConfig):
                from npa_pulumi.components import SlurmGate, SlurmGateArgs

                gate = SlurmGate(
                    f"{plan.cluster_name}-slurm",
                    SlurmGateArgs(
                        **stage.gate_args,
                        server=stage.credentials.server,
                        slurm=plan.backend_gate,
                        gate=plan.health_gate,
                    ),
                    pulumi.ResourceOptions(parent=cluster, depends_on=[stage.objects]),
                )
                export(
                    SoperatorOutputs,
                    lifecycle=gate.lifecycle,
                    validation="slurm",
                    health_evidence=gate.evidence,
                    slurm_status=gate.slurm_status,
                )
                gated = True
        if not gated:
            export_ungated()

    return program
