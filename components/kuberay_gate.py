"""`KubeRayGate`: the step of a KubeRay cluster's stack that decides whether its Ray cluster is up.

It runs after the fleet's KubeRay objects and the GPU health gate, and waits (within the cluster's gate
timeout) for what KubeRay itself reports: `RayClusterProvisioned` True, `HeadPodReady` True,
`readyWorkerReplicas` equal to the spec, and every Ray pod on the CPU node group with the pinned image
(npa_pulumi/kube/kuberay.py). Like the GPU health gate it never fails the update: it records `passed`,
`lifecycle` (deployed | deployed-validation-failed | deployed-credentials-failed) and `evidence` (the Ray
conditions, counts and pods it saw, and what was missing), and it runs again when what it judged changed
or its last run did not pass, so a retried `up` re-runs only the gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi import Input
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from npa_pulumi.components._cloud import cloud_for
from npa_pulumi.components.args import (
    FleetResourceArgs,
    FleetResourceInputs,
    ProviderModel,
    as_props,
    with_outputs,
)
from npa_pulumi.runtime.supervision import watch_run

watch_run()  # in the provider host: stop with the run that started it

_JUDGED = ("cluster_id", "context", "server", "node_group_ids", "raycluster", "ray")


@dataclass(frozen=True, kw_only=True)
class KubeRayGateArgs(FleetResourceArgs):
    tenant_id: str
    region: str
    cluster_id: Input[str]
    context: str
    node_group_ids: Input[list[str]]  # judged: a replaced node group runs the gate again
    server: Input[str]  # judged: a cluster recreated under the same id answers elsewhere
    raycluster: Input[str]  # the fleet's RayCluster (namespace/name): the gate waits for it
    ray: dict[str, Any]  # npa_pulumi.kube.kuberay.RayGateConfig's fields


class KubeRayGateInputs(FleetResourceInputs):
    cluster_id: str
    context: str
    ray: dict[str, Any]


class KubeRayGateOutputs(ProviderModel):
    passed: bool
    lifecycle: str
    evidence: dict[str, Any]


def _run(inputs: KubeRayGateInputs) -> KubeRayGateOutputs:
    from npa_pulumi.kube.client import KubeClient
    from npa_pulumi.kube.kubeconfig import dump
    from npa_pulumi.kube.kuberay import RayGateConfig, wait_for_ray

    cloud = cloud_for(inputs.cloud, inputs.profile, inputs.region, inputs.tenant_id)
    try:
        kubeconfig = dump(cloud.cluster_access(inputs.cluster_id).kubeconfig(inputs.context))
    except Exception as err:
        refused = {"passed": False, "reason": f"no credentials for the cluster's API: {err}"}
        return KubeRayGateOutputs(passed=False, lifecycle="deployed-credentials-failed", evidence=refused)

    def client_for(timeout_s: float) -> KubeClient:
        return KubeClient.from_kubeconfig(kubeconfig, timeout_s=timeout_s)

    evidence = wait_for_ray(client_for, RayGateConfig(**inputs.ray))
    passed = bool(evidence["passed"])
    if not passed:
        missing = [str(m) for m in evidence.get("missing") or []]
        evidence["reason"] = "the Ray cluster is not ready: " + "; ".join(missing)
    return KubeRayGateOutputs(
        passed=passed, lifecycle="deployed" if passed else "deployed-validation-failed", evidence=evidence
    )


class KubeRayGateProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = KubeRayGateInputs.model_validate(props)
        return CreateResult(id_=f"ray-gate-{inputs.cluster_id}", outs=with_outputs(props, _run(inputs)))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in _JUDGED if olds.get(k) != news.get(k)]
        return DiffResult(
            changes=bool(changed) or not olds.get("passed"), replaces=[], delete_before_replace=False
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=with_outputs(news, _run(KubeRayGateInputs.model_validate(news))))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None


class KubeRayGate(pulumi.dynamic.Resource, module="npa", name="KubeRayGate"):
    passed: pulumi.Output[bool]
    lifecycle: pulumi.Output[str]
    evidence: pulumi.Output[dict[str, Any]]

    def __init__(
        self, resource_name: str, args: KubeRayGateArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        props = {**as_props(args), "passed": None, "lifecycle": None, "evidence": None}
        super().__init__(KubeRayGateProvider(), resource_name, props, opts)
