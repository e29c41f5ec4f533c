"""`GpuFabricCheck`: the part of a cluster's health gate that qualifies its fabric for training.

Once the GPU health gate (`GpuHealthGate`) passed, it runs the fabric check (npa_pulumi/kube/
fabric_check.py): NCCL all-reduce bus bandwidth on every GPU node (NVLink/NVSwitch) and across all GPU
nodes (InfiniBand), against the thresholds of the cluster's platform and preset or its spec. Like the gate
it records the outcome as outputs (`passed`, `lifecycle`, `evidence`) and never fails the update, so
nothing is deleted when the fabric is slow; a run the gate did not pass is `skipped` (the gate's state
stands).

It runs again exactly when what it judged changes (the cluster, its node groups, its settings, the gate's
outcome), or when its last run did not pass, so a retried `up` re-runs only the gate's steps. The engine
records the cluster as `validating-fabric` while it runs (engine/automation/stack_state.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from npa_pulumi.kube.fabric_check import FabricConfig

watch_run()  # in the provider host: stop with the run that started it (npa_pulumi/runtime/supervision.py)


@dataclass(frozen=True, kw_only=True)
class GpuFabricCheckArgs(GateArgs):
    gate_passed: Input[bool]  # the health gate's outcome: the fabric is measured only on a healthy cluster
    fabric: FabricConfig  # in state as its `to_inputs()`


class GpuFabricCheckInputs(GateInputs):
    gate_passed: bool = False
    fabric: dict[str, Any]


def _run(inputs: GpuFabricCheckInputs) -> GateOutputs:
    from npa_pulumi.kube.fabric_check import FabricConfig, run_fabric_check

    if not inputs.gate_passed:
        evidence = {"status": "skipped", "passed": False, "reason": "the GPU health gate did not pass"}
        return GateOutputs(passed=False, lifecycle="", evidence=evidence)
    config = FabricConfig.from_inputs(inputs.fabric)
    try:
        client_for = cluster_clients(inputs)
    except Exception as err:  # the cloud refused the credentials: the cluster stays, the state says so
        evidence = {"status": "failed", "passed": False, "reason": f"no credentials for the cluster: {err}"}
        return GateOutputs(passed=False, lifecycle="deployed-credentials-failed", evidence=evidence)
    evidence = run_fabric_check(client_for, config)
    passed = bool(evidence["passed"])
    lifecycle = "deployed" if passed else "deployed-validation-failed"
    return GateOutputs(passed=passed, lifecycle=lifecycle, evidence=evidence)


class GpuFabricCheckProvider(GateProvider):
    inputs_model = GpuFabricCheckInputs
    id_prefix = "fabric"
    judged = ("fabric", "gate_passed")

    def run(self, inputs: GpuFabricCheckInputs) -> GateOutputs:
        return _run(inputs)


class GpuFabricCheck(pulumi.dynamic.Resource, module="npa", name="GpuFabricCheck"):
    passed: pulumi.Output[bool]
    lifecycle: pulumi.Output[str]
    evidence: pulumi.Output[dict[str, Any]]

    def __init__(
        self, resource_name: str, args: GpuFabricCheckArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        # The Pulumi boundary: the settings as plain JSON.
        props = {**as_props(args), "fabric": args.fabric.to_inputs(), **GATE_OUTPUTS}
        super().__init__(GpuFabricCheckProvider(), resource_name, props, opts)


def combine_with_gate(values: list[Any]) -> tuple[str, dict[str, Any]]:
    """The cluster's lifecycle and evidence from the gate's and the fabric check's: the gate's state when
    it did not pass; otherwise the fabric's, its evidence under `fabric` and, when it failed, its reason."""
    gate_lifecycle, gate_evidence, fabric_lifecycle, fabric_evidence = values
    evidence = {**(gate_evidence or {}), "fabric": fabric_evidence or {}}
    if gate_lifecycle != "deployed" or not fabric_lifecycle:
        return str(gate_lifecycle), evidence
    if fabric_lifecycle != "deployed":
        reason = (fabric_evidence or {}).get("reason", "")
        evidence |= {"passed": False, "phase": "fabric", "reason": f"fabric check failed: {reason}"}
    return str(fabric_lifecycle), evidence
