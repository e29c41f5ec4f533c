"""`GpuHealthGate`: the step of a cluster stack that decides whether the cluster is `deployed`.

It runs the GPU health gate (npa_pulumi/kube/gpu_health.py) against the cluster's API, or for a CPU-only
cluster the cluster-basics check (every node Ready with a boot id), and records the outcome as outputs
(`passed`, `lifecycle`, `evidence`), never failing the stack update: the cloud resources, the Terraform
state and the kubeconfig are kept, and `status` on any machine reads the outcome from the stack.

It runs again exactly when what it judged changes (the cluster, its node groups, the driver settings, the
gate's own settings), or when its last run did not pass, so a retried `up` after a fault re-runs only the
gate, not Terraform.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from npa_pulumi.bridge.orphans import watch_run

watch_run()  # in the provider host: stop with the run that started it (npa_pulumi/bridge/orphans.py)

_JUDGED = ("cluster_id", "context", "node_group_ids", "driver", "gate")


def _run(props: dict[str, Any]) -> dict[str, Any]:
    from npa_pulumi.components._cloud import cloud_for

    from npa_pulumi.kube.client import KubeClient, KubeError
    from npa_pulumi.kube.gpu_health import GateConfig, run_gate
    from npa_pulumi.kube.kubeconfig import dump

    config = GateConfig(**props["gate"])
    try:
        kubeconfig = dump(cloud_for(props).cluster_access(props["cluster_id"]).kubeconfig(props["context"]))
    except Exception as err:  # the cloud refused the credentials: the cluster stays, the state says so
        return {
            "passed": False,
            "lifecycle": "deployed-credentials-failed",
            "evidence": {"passed": False, "reason": f"no credentials for the cluster's API: {err}"},
        }

    def client_for(timeout_s: float) -> KubeClient:
        return KubeClient.from_kubeconfig(kubeconfig, timeout_s=timeout_s)

    try:
        evidence = run_gate(client_for, config).to_json()
    except KubeError as err:
        evidence = {"passed": False, "reason": f"the cluster's API failed the gate: {err}"}
    failed = "deployed-mig-not-ready" if config.mig else "deployed-validation-failed"
    return {
        "passed": bool(evidence["passed"]),
        "lifecycle": "deployed" if evidence["passed"] else failed,
        "evidence": evidence,
    }


class GpuHealthGateProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"gate-{props['cluster_id']}", outs={**props, **_run(props)})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in _JUDGED if olds.get(k) != news.get(k)]
        return DiffResult(
            changes=bool(changed) or not olds.get("passed"), replaces=[], delete_before_replace=False
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={**news, **_run(news)})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)  # a refresh does not re-run the gate

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None


class GpuHealthGate(pulumi.dynamic.Resource, module="npa", name="GpuHealthGate"):
    passed: pulumi.Output[bool]
    lifecycle: pulumi.Output[str]
    evidence: pulumi.Output[dict[str, Any]]

    def __init__(self, resource_name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        outputs = {"passed": None, "lifecycle": None, "evidence": None}
        super().__init__(GpuHealthGateProvider(), resource_name, {**props, **outputs}, opts)
