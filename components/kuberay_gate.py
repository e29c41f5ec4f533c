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

from npa_pulumi.components._gate import (
    GATE_OUTPUTS,
    GateArgs,
    GateInputs,
    GateOutputs,
    GateProvider,
    cluster_clients,
)
from npa_pulumi.components.args import as_props
from npa_pulumi.runtime.supervision import watch_run

watch_run()  # in the provider host: stop with the run that started it


@dataclass(frozen=True, kw_only=True)
class KubeRayGateArgs(GateArgs):
    raycluster: Input[str]  # the fleet's RayCluster (namespace/name): the gate waits for it
    ray: dict[str, Any]  # npa_pulumi.kube.kuberay.RayGateConfig's fields


class KubeRayGateInputs(GateInputs):
    ray: dict[str, Any]


def _run(inputs: KubeRayGateInputs) -> GateOutputs:
    from npa_pulumi.kube.kuberay import RayGateConfig, wait_for_ray

    try:
        client_for = cluster_clients(inputs)
    except Exception as err:
        refused = {"passed": False, "reason": f"no credentials for the cluster's API: {err}"}
        return GateOutputs(passed=False, lifecycle="deployed-credentials-failed", evidence=refused)

    evidence = wait_for_ray(client_for, RayGateConfig(**inputs.ray))
    passed = bool(evidence["passed"])
    if not passed:
        missing = [str(m) for m in evidence.get("missing") or []]
        evidence["reason"] = "the Ray cluster is not ready: " + "; ".join(missing)
    return GateOutputs(
        passed=passed, lifecycle="deployed" if passed else "deployed-validation-failed", evidence=evidence
    )


class KubeRayGateProvider(GateProvider):
    inputs_model = KubeRayGateInputs
    id_prefix = "ray-gate"
    judged = ("raycluster", "ray")

    def run(self, inputs: KubeRayGateInputs) -> GateOutputs:
        return _run(inputs)


class KubeRayGate(pulumi.dynamic.Resource, module="npa", name="KubeRayGate"):
    passed: pulumi.Output[bool]
    lifecycle: pulumi.Output[str]
    evidence: pulumi.Output[dict[str, Any]]

    def __init__(
        self, resource_name: str, args: KubeRayGateArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        props = {**as_props(args), **GATE_OUTPUTS}
        super().__init__(KubeRayGateProvider(), resource_name, props, opts)
