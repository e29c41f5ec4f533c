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
from npa_pulumi.kube.gpu_health.config import GateConfig
from npa_pulumi.runtime.supervision import watch_run

watch_run()  # in the provider host: stop with the run that started it

_JUDGED = ("cluster_id", "context", "server", "node_group_ids", "slurm", "gate")


@dataclass(frozen=True, kw_only=True)
class SlurmGateArgs(FleetResourceArgs):
    tenant_id: str
    region: str
    cluster_id: Input[str]
    context: str
    node_group_ids: Input[list[str]]  # judged: a replaced node group runs the gate again
    server: Input[str]
    slurm: dict[str, Any]  # npa_pulumi.kube.slurm_check.SlurmGateConfig's fields
    gate: GateConfig | None  # in state as its `to_inputs()`


class SlurmGateInputs(FleetResourceInputs):
    tenant_id: str
    region: str
    cluster_id: str
    context: str
    slurm: dict[str, Any]
    gate: dict[str, Any] | None = None


class SlurmGateOutputs(ProviderModel):
    passed: bool
    lifecycle: str  # deployed | deployed-validation-failed | deployed-credentials-failed
    evidence: dict[str, Any]
    slurm_status: dict[str, Any]  # the native status the gate last saw


def _run(inputs: SlurmGateInputs) -> SlurmGateOutputs:
    from npa_pulumi.kube.client import KubeClient, KubeError
    from npa_pulumi.kube.gpu_health.gate import run_gate
    from npa_pulumi.kube.kubeconfig import dump
    from npa_pulumi.kube.slurm_check import SlurmGateConfig, wait_for_slurm

    cloud = cloud_for(inputs.cloud, inputs.profile, inputs.region, inputs.tenant_id)
    try:
        kubeconfig = dump(cloud.cluster_access(inputs.cluster_id).kubeconfig(inputs.context))
    except Exception as err:
        refused = {"passed": False, "reason": f"no credentials for the cluster's API: {err}"}
        return SlurmGateOutputs(
            passed=False, lifecycle="deployed-credentials-failed", evidence=refused, slurm_status={}
        )

    def client_for(timeout_s: float) -> KubeClient:
        return KubeClient.from_kubeconfig(kubeconfig, timeout_s=timeout_s)

    config = SlurmGateConfig(**inputs.slurm)
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


class SlurmGateProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = SlurmGateInputs.model_validate(props)
        return CreateResult(id_=f"slurm-gate-{inputs.cluster_id}", outs=with_outputs(props, _run(inputs)))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in _JUDGED if olds.get(k) != news.get(k)]
        return DiffResult(
            changes=bool(changed) or not olds.get("passed"), replaces=[], delete_before_replace=False
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=with_outputs(news, _run(SlurmGateInputs.model_validate(news))))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)  # a refresh does not re-run the gate

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None


class SlurmGate(pulumi.dynamic.Resource, module="npa", name="SlurmGate"):
    passed: pulumi.Output[bool]
    lifecycle: pulumi.Output[str]
    evidence: pulumi.Output[dict[str, Any]]
    slurm_status: pulumi.Output[dict[str, Any]]

    def __init__(
        self, resource_name: str, args: SlurmGateArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        gate = None if args.gate is None else args.gate.to_inputs()  # the Pulumi boundary: plain JSON
        props = {**as_props(args), "gate": gate, "passed": None, "lifecycle": None, "evidence": None}
        props["slurm_status"] = None
        super().__init__(SlurmGateProvider(), resource_name, props, opts)
