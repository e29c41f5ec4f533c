"""An mk8s cluster's own status beyond its node groups: a KubeRay cluster's Ray readiness, read live from
the cluster's API for `status` (what the Ray gate last saw when it cannot be), as the gate recorded it for
`up`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.backends.base import NativeStatus
from npa_pulumi.engine.backends.mk8s.program import ray_summary
from npa_pulumi.output.stack_outputs import ClusterOutputs

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.engine.programs import ClusterPlan


def recorded_status(outputs: Mapping[str, Any]) -> NativeStatus:
    """The Ray gate's summary as the stack recorded it (engine/backends/mk8s/program.py)."""
    return NativeStatus({"kuberay": ClusterOutputs.read(outputs).kuberay})


def native_status(cloud: CloudPort, plan: ClusterPlan, outputs: Mapping[str, Any]) -> NativeStatus:
    recorded = ClusterOutputs.read(outputs)
    if recorded.kuberay is None:
        return NativeStatus()
    return NativeStatus({"kuberay": _ray_readiness(cloud, plan, recorded, recorded.kuberay)})


def _ray_readiness(
    cloud: CloudPort, plan: ClusterPlan, outputs: ClusterOutputs, recorded: dict[str, Any]
) -> dict[str, Any]:
    """The Ray cluster's readiness now, read from the cluster (the gate's last look when it cannot be)."""
    from npa_pulumi.kube.client import KubeClient
    from npa_pulumi.kube.kubeconfig import dump
    from npa_pulumi.kube.kuberay import RayGateConfig, check_ray

    if plan.kuberay is None or not outputs.kube_context:
        return {**recorded, "live": False}
    config = RayGateConfig(
        worker_replicas=plan.kuberay.worker_replicas,
        image=plan.kuberay.image,
        cpu_node_group=plan.kuberay.cpu_node_group,
        timeout_s=0,
    )
    try:
        access = cloud.cluster_access(str(outputs.cluster_id))
        client = KubeClient.from_kubeconfig(dump(access.kubeconfig(outputs.kube_context)), timeout_s=10.0)
        snap = check_ray(client, config).to_json()
    except Exception as err:  # the API unreachable: say so, keep what the gate saw
        return {**recorded, "live": False, "error": str(err)}
    return {**ray_summary({**snap, "passed": snap["ready"]}), "live": True}
