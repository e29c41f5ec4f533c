"""The inline Pulumi program of an mk8s cluster stack: the k8s-training recipe through the Terraform bridge
(K8sTrainingCluster), the in-cluster stage every cluster stack shares (engine/programs.py), then the GPU
health gate, the fabric check after it and, for a KubeRay cluster, the Ray gate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from npa_pulumi.engine.programs import (
    ClusterPlan,
    cluster_module_args,
    export,
    export_ungated,
    in_cluster_stage,
    project_identity,
)
from npa_pulumi.output.stack_outputs import ClusterOutputs


def cluster_program(
    plan: ClusterPlan,
    cloud: str,
    profile: str,
    project_stack_ready: bool,
    fingerprint: str,
    adopted_state: str | None = None,
) -> Callable[[], None]:
    """`adopted_state`: `adopt` takes over a cluster the original tool's Terraform deployed (its state)."""
    if plan.in_cluster:
        # Load pulumi-kubernetes here, in the thread that builds the operations, before the programs run
        # side by side in worker threads (see components/in_cluster.py).
        import npa_pulumi.components.in_cluster  # noqa: F401

    def program() -> None:
        import pulumi

        from npa_pulumi.components import K8sTrainingCluster, K8sTrainingClusterArgs

        project_id, subnet_id = project_identity(plan, project_stack_ready)
        cluster = K8sTrainingCluster(
            plan.cluster_name,
            K8sTrainingClusterArgs(
                **cluster_module_args(plan, cloud, profile, project_id, subnet_id),
                recipe_facts=plan.recipe_facts,
                capacity_block_group=plan.capacity_block_group,
                gpu_driver_mode=plan.gpu_driver_mode,
                allow_unsafe_nvswitch_operator=plan.allow_unsafe_nvswitch_operator,
                nvswitch_topology=plan.nvswitch_topology,
                mig_enabled=plan.mig_enabled,
                adopted_state=adopted_state,
            ),
        )
        export(ClusterOutputs, project_id=project_id, subnet_id=subnet_id, npa_fingerprint=fingerprint)
        if plan.cost_basis:
            export(ClusterOutputs, cost_basis=plan.cost_basis)
        export(
            ClusterOutputs,
            cluster_id=cluster.cluster_id,
            endpoint=cluster.endpoint,
            node_group_ids=cluster.node_group_ids,
            filesystem=cluster.filesystem,
            kube_context=cluster.kube_context,
            live_objects=cluster.live_objects,
        )
        gated = False
        if plan.in_cluster:
            stage = in_cluster_stage(
                plan,
                cloud,
                profile,
                cluster,
                rtx_driver_repositories=plan.rtx_driver_repositories,
                kuberay=plan.kuberay,
            )
            in_cluster, credentials, objects = stage.gate_args, stage.credentials, stage.objects
            if plan.kuberay is not None:
                from npa_pulumi.kube.kuberay import fleet_objects

                export(ClusterOutputs, kuberay_objects=objects.raycluster.apply(lambda _r: fleet_objects()))
            if plan.health_gate is not None:
                from npa_pulumi.components import GpuHealthGate, GpuHealthGateArgs

                gate = GpuHealthGate(
                    f"{plan.cluster_name}-health",
                    # The driver and the gate's settings are judged too (and a failed run always re-runs).
                    GpuHealthGateArgs(
                        **in_cluster,
                        server=credentials.server,
                        driver=_judged_driver(plan),
                        gate=plan.health_gate,
                    ),
                    pulumi.ResourceOptions(parent=cluster, depends_on=[objects]),
                )
                lifecycle, evidence = _with_fabric_check(plan, in_cluster, credentials.server, gate)
                if plan.kuberay is not None:
                    lifecycle, evidence = _kuberay_gate(
                        plan, in_cluster, credentials.server, objects, gate, cluster, lifecycle, evidence
                    )
                validation = (
                    "mig" if plan.mig_enabled else "gpu-health" if plan.has_gpus else "cluster-basics"
                )
                export(ClusterOutputs, lifecycle=lifecycle, validation=validation, health_evidence=evidence)
                gated = True
        if not gated:
            export_ungated()

    return program


def _judged_driver(plan: ClusterPlan) -> dict[str, Any]:
    """What of the driver re-runs the gate when it changes: the mode, MIG, and the RTX values' revision
    (left out without it, so other clusters' gates keep their inputs)."""
    driver: dict[str, Any] = {"mode": plan.gpu_driver_mode, "mig": plan.mig_enabled}
    if plan.rtx_values_revision:
        driver["rtx_values_revision"] = plan.rtx_values_revision
    return driver


def _with_fabric_check(
    plan: ClusterPlan, in_cluster: dict[str, Any], server: Any, gate: Any
) -> tuple[Any, Any]:
    """The cluster's lifecycle and health evidence: the gate's, with the fabric check's (its own step,
    components/gpu_fabric.py) after it; a check that does not apply is recorded as `not-applicable`."""
    import pulumi

    fabric = plan.fabric_check
    if fabric is None:
        return gate.lifecycle, gate.evidence
    if fabric.not_applicable:
        record = {"status": "not-applicable", "passed": True, "reason": fabric.not_applicable}
        return gate.lifecycle, gate.evidence.apply(lambda e: {**(e or {}), "fabric": record})
    from npa_pulumi.components.gpu_fabric import GpuFabricCheck, GpuFabricCheckArgs, combine_with_gate

    check = GpuFabricCheck(
        f"{plan.cluster_name}-fabric",
        GpuFabricCheckArgs(**in_cluster, server=server, gate_passed=gate.passed, fabric=fabric),
        pulumi.ResourceOptions(parent=gate, depends_on=[gate]),
    )
    combined = pulumi.Output.all(gate.lifecycle, gate.evidence, check.lifecycle, check.evidence).apply(
        combine_with_gate
    )
    return combined.apply(lambda c: c[0]), combined.apply(lambda c: c[1])


def _kuberay_gate(
    plan: ClusterPlan,
    in_cluster: dict[str, Any],
    server: Any,
    objects: Any,
    gate: Any,
    cluster: Any,
    before: Any,
    evidence: Any,
) -> Any:
    """The Ray gate after the health gate (and its fabric check): `before` and `evidence` are what those
    decided; the cluster is deployed only when all passed."""
    import pulumi

    from npa_pulumi.components import KubeRayGate, KubeRayGateArgs

    assert plan.kuberay is not None and plan.health_gate is not None
    ray = KubeRayGate(
        f"{plan.cluster_name}-kuberay-gate",
        KubeRayGateArgs(
            **in_cluster,
            server=server,
            raycluster=objects.raycluster,
            ray={
                "worker_replicas": plan.kuberay.worker_replicas,
                "image": plan.kuberay.image,
                "cpu_node_group": plan.kuberay.cpu_node_group,
                "timeout_s": float(plan.health_gate.timeout_s),
            },
        ),
        pulumi.ResourceOptions(parent=cluster, depends_on=[objects, gate]),
    )
    export(ClusterOutputs, kuberay=ray.evidence.apply(ray_summary))
    lifecycle = pulumi.Output.all(before, ray.lifecycle).apply(
        lambda states: states[1] if states[0] == "deployed" else states[0]
    )
    return lifecycle, pulumi.Output.all(evidence, ray.evidence).apply(lambda e: merge_evidence(*e))


def merge_evidence(health: dict[str, Any], ray: dict[str, Any]) -> dict[str, Any]:
    """The health gate's evidence with the Ray gate's under `kuberay`; when the health gate passed, the
    Ray gate decides `passed` and gives the reason."""
    merged = {**(health or {}), "kuberay": ray or {}}
    if (health or {}).get("passed"):
        merged["passed"] = bool((ray or {}).get("passed"))
        if not merged["passed"]:
            merged["reason"] = (ray or {}).get("reason", "the Ray cluster is not ready")
    return merged


def ray_summary(evidence: dict[str, Any]) -> dict[str, Any]:
    """What `status` shows of the Ray gate's last look: ready/desired workers, the head, what was missing."""
    return {
        "ready": bool(evidence.get("passed")),
        "ready_workers": evidence.get("ready_workers", 0),
        "desired_workers": evidence.get("desired_workers", 0),
        "head_ready": bool(evidence.get("head_ready")),
        "conditions": evidence.get("conditions") or {},
        "missing": evidence.get("missing") or [],
    }
