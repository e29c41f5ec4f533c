"""`SlurmGate`: the step of a soperator cluster stack that decides whether the Slurm cluster is `deployed`.

It waits, within the target's timeout, for the SlurmCluster to be `Available` with every NodeSet `Ready` at
its size (npa_pulumi/kube/slurm_check.py), then runs the GPU health gate (npa_pulumi/kube/gpu_health/)
over the cluster's nodes: every node Ready, and the GPU checks and CUDA smoke on the GPU workers. Like
`GpuHealthGate`, it records the outcome as outputs and never fails the update: everything is kept, and a
retried `up` re-runs only this step (it runs again whenever its last run did not pass).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from npa_pulumi.kube.slurm_check import SlurmGateConfig

watch_run()  # in the provider host: stop with the run that started it


@dataclass(frozen=True, kw_only=True)
class SlurmGateArgs(GateArgs):
    slurm: SlurmGateConfig  # in state as its `to_inputs()`
    gate: GateConfig | None  # likewise


class SlurmGateInputs(GateInputs):
    tenant_id: str
    region: str
    slurm: dict[str, Any]
    gate: dict[str, Any] | None = None


class SlurmGateOutputs(GateOutputs):
    slurm_status: dict[str, Any]  # the native status the gate last saw


def _run(inputs: SlurmGateInputs) -> SlurmGateOutputs:
    from npa_pulumi.kube.client import KubeError
    from npa_pulumi.kube.gpu_health.gate import run_gate
    from npa_pulumi.kube.slurm_check import SlurmGateConfig, wait_for_slurm

    try:
        client_for = cluster_clients(inputs)
    except Exception as err:
        refused = {"passed": False, "reason": f"no credentials for the cluster's API: {err}"}
        return SlurmGateOutputs(
            passed=False, lifecycle="deployed-credentials-failed", evidence=refused, slurm_status={}
        )

    config = SlurmGateConfig.from_inputs(inputs.slurm)
    started = time.monotonic()
    evidence: dict[str, Any]
    try:
        slurm = wait_for_slurm(client_for, config)
        evidence = {
            "passed": slurm.passed,
            "phase": "slurm",
            "reason": slurm.reason,
            "slurm": slurm.to_json(),
        }
        if slurm.passed and inputs.gate is not None:
            left = max(1.0, config.timeout_s - (time.monotonic() - started))
            gpu = run_gate(client_for, GateConfig.from_inputs({**inputs.gate, "timeout_s": left})).to_json()
            evidence = {**gpu, "slurm": slurm.to_json()}
        status = slurm.status
    except KubeError as err:
        evidence = {"passed": False, "reason": f"the cluster's API failed the gate: {err}"}
        status = {}
    passed = bool(evidence["passed"])
    return SlurmGateOutputs(
        passed=passed,
        lifecycle="deployed" if passed else "deployed-validation-failed",
        evidence=evidence,
        slurm_status=status,
    )


class SlurmGateProvider(GateProvider):
    inputs_model = SlurmGateInputs
    id_prefix = "slurm-gate"
    judged = ("slurm", "gate")

    def run(self, inputs: SlurmGateInputs) -> GateOutputs:
        return _run(inputs)


class SlurmGate(pulumi.dynamic.Resource, module="npa", name="SlurmGate"):
    passed: pulumi.Output[bool]
    lifecycle: pulumi.Output[str]
    evidence: pulumi.Output[dict[str, Any]]
    slurm_status: pulumi.Output[dict[str, Any]]

    def __init__(
        self, resource_name: str, args: SlurmGateArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        gate = None if args.gate is None else args.gate.to_inputs()  # the Pulumi boundary: plain JSON
        slurm = args.slurm.to_inputs()
        props = {**as_props(args), "slurm": slurm, "gate": gate, **GATE_OUTPUTS, "slurm_status": None}
        super().__init__(SlurmGateProvider(), resource_name, props, opts)
