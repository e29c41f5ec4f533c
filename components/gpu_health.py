"""`GpuHealthGate`: the step of a cluster stack that decides whether the cluster is `deployed`.

It runs the GPU health gate (npa_pulumi/kube/gpu_health/) against the cluster's API — MIG readiness for a
MIG cluster, the cluster-basics check (every node Ready with a boot id) for a CPU-only one — and records
the outcome as outputs (`passed`, `lifecycle`, `evidence`), never failing the stack update: the cloud
resources, the Terraform state and the kubeconfig are kept, and `status` on any machine reads the outcome
from the stack.

It runs again exactly when what it judged changes (the cluster, its node groups, the driver settings, the
gate's own settings), or when its last run did not pass, so a retried `up` after a fault re-runs only the
gate, not Terraform.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from npa_pulumi.components._gate import (
    GATE_OUTPUTS,
    GateArgs,
    GateInputs,
    GateOutputs,
    GateProvider,
    cluster_clients,
)
from npa_pulumi.components.args import as_props
from npa_pulumi.kube.gpu_health.config import GateConfig
from npa_pulumi.runtime.supervision import watch_run

watch_run()  # in the provider host: stop with the run that started it (npa_pulumi/runtime/supervision.py)


@dataclass(frozen=True, kw_only=True)
class GpuHealthGateArgs(GateArgs):
    driver: dict[str, Any]  # the driver mode and MIG: judged likewise
    gate: GateConfig  # judged likewise; in state as its `to_inputs()`


class GpuHealthGateInputs(GateInputs):
    gate: dict[str, Any]


def _run(inputs: GpuHealthGateInputs) -> GateOutputs:
    from npa_pulumi.kube.client import KubeError
    from npa_pulumi.kube.gpu_health.gate import run_gate

    config = GateConfig.from_inputs(inputs.gate)
    try:
        client_for = cluster_clients(inputs)
    except Exception as err:  # the cloud refused the credentials: the cluster stays, the state says so
        evidence = {"passed": False, "reason": f"no credentials for the cluster's API: {err}"}
        return GateOutputs(passed=False, lifecycle="deployed-credentials-failed", evidence=evidence)
    try:
        evidence = run_gate(client_for, config).to_json()
    except KubeError as err:
        evidence = {"passed": False, "reason": f"the cluster's API failed the gate: {err}"}
    passed = bool(evidence["passed"])
    failed = "deployed-mig-not-ready" if config.mig else "deployed-validation-failed"
    return GateOutputs(passed=passed, lifecycle="deployed" if passed else failed, evidence=evidence)


class GpuHealthGateProvider(GateProvider):
    inputs_model = GpuHealthGateInputs
    id_prefix = "gate"
    judged = ("driver", "gate")

    def run(self, inputs: GpuHealthGateInputs) -> GateOutputs:
        return _run(inputs)


class GpuHealthGate(pulumi.dynamic.Resource, module="npa", name="GpuHealthGate"):
    passed: pulumi.Output[bool]
    lifecycle: pulumi.Output[str]
    evidence: pulumi.Output[dict[str, Any]]

    def __init__(
        self, resource_name: str, args: GpuHealthGateArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        gate = args.gate.to_inputs()  # the Pulumi boundary: plain JSON in state
        props = {**as_props(args), "gate": gate, **GATE_OUTPUTS}
        super().__init__(GpuHealthGateProvider(), resource_name, props, opts)
