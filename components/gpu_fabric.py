"""`GpuFabricCheck`: the part of a cluster's health gate that qualifies its fabric for training.

Once the GPU health gate (`GpuHealthGate`) passed, it runs the fabric check (npa_pulumi/kube/
fabric_check.py): NCCL all-reduce bus bandwidth on every GPU node (NVLink/NVSwitch) and across all GPU
nodes (InfiniBand), against the thresholds of the cluster's platform and preset or its spec. Like the gate
it records the outcome as outputs (`passed`, `lifecycle`, `evidence`) and never fails the update, so
nothing is deleted when the fabric is slow; a run the gate did not pass is `skipped` (the gate's state
stands).

It runs again exactly when what it judged changes (the cluster, its node groups, its settings, the gate's
outcome), or when its last run did not pass, so a retried `up` re-runs only the gate's steps. The engine
records the cluster as `validating-fabric` while it runs (engine/automation/stack_operations.py).
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

watch_run()  # in the provider host: stop with the run that started it (npa_pulumi/runtime/supervision.py)

_JUDGED = ("cluster_id", "context", "server", "node_group_ids", "fabric", "gate_passed")


@dataclass(frozen=True, kw_only=True)
class GpuFabricCheckArgs(FleetResourceArgs):
    tenant_id: str
    region: str
    cluster_id: Input[str]
    context: str
    node_group_ids: Input[list[str]]
    server: Input[str]
    gate_passed: Input[bool]  # the health gate's outcome: the fabric is measured only on a healthy cluster
    fabric: dict[str, Any]  # npa_pulumi.kube.fabric_check.FabricConfig's fields


class GpuFabricCheckInputs(FleetResourceInputs):
    cluster_id: str
    context: str
    gate_passed: bool = False
    fabric: dict[str, Any]


class GpuFabricCheckOutputs(ProviderModel):
    passed: bool
    lifecycle: str  # deployed | deployed-validation-failed | "" (skipped: the gate's state stands)
    evidence: dict[str, Any]


def _run(inputs: GpuFabricCheckInputs) -> GpuFabricCheckOutputs:
    from npa_pulumi.kube.client import KubeClient
    from npa_pulumi.kube.fabric_check import FabricConfig, run_fabric_check
    from npa_pulumi.kube.kubeconfig import dump

    if not inputs.gate_passed:
        evidence = {"status": "skipped", "passed": False, "reason": "the GPU health gate did not pass"}
        return GpuFabricCheckOutputs(passed=False, lifecycle="", evidence=evidence)
    config = FabricConfig(**inputs.fabric)
    cloud = cloud_for(inputs.cloud, inputs.profile, inputs.region, inputs.tenant_id)
    try:
        kubeconfig = dump(cloud.cluster_access(inputs.cluster_id).kubeconfig(inputs.context))
    except Exception as err:  # the cloud refused the credentials: the cluster stays, the state says so
        evidence = {"status": "failed", "passed": False, "reason": f"no credentials for the cluster: {err}"}
        return GpuFabricCheckOutputs(passed=False, lifecycle="deployed-credentials-failed", evidence=evidence)
    evidence = run_fabric_check(lambda t: KubeClient.from_kubeconfig(kubeconfig, timeout_s=t), config)
    passed = bool(evidence["passed"])
    lifecycle = "deployed" if passed else "deployed-validation-failed"
    return GpuFabricCheckOutputs(passed=passed, lifecycle=lifecycle, evidence=evidence)


class GpuFabricCheckProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = GpuFabricCheckInputs.model_validate(props)
        return CreateResult(id_=f"fabric-{inputs.cluster_id}", outs=with_outputs(props, _run(inputs)))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in _JUDGED if olds.get(k) != news.get(k)]
        return DiffResult(
            changes=bool(changed) or not olds.get("passed"), replaces=[], delete_before_replace=False
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=with_outputs(news, _run(GpuFabricCheckInputs.model_validate(news))))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)  # a refresh does not re-run the check

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None


class GpuFabricCheck(pulumi.dynamic.Resource, module="npa", name="GpuFabricCheck"):
    passed: pulumi.Output[bool]
    lifecycle: pulumi.Output[str]
    evidence: pulumi.Output[dict[str, Any]]

    def __init__(
        self, resource_name: str, args: GpuFabricCheckArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        props = {**as_props(args), "passed": None, "lifecycle": None, "evidence": None}
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
