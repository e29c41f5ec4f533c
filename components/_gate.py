"""What the fleet's gate steps share (`GpuHealthGate`, `GpuFabricCheck`, `KubeRayGate`, `SlurmGate`).

Each is a dynamic resource of a cluster stack that judges the cluster through its Kubernetes API and
records the outcome as outputs (`passed`, `lifecycle`, `evidence`), never failing the update. Their
providers behave alike: create and update run the step; diff runs it again exactly when a property it
judged changed or its last run did not pass (so a retried `up` re-runs only the gates); a refresh never
re-runs it; delete has nothing to remove.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pulumi import Input
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from npa_pulumi.components._cloud import cloud_for
from npa_pulumi.components.args import FleetResourceArgs, FleetResourceInputs, ProviderModel, with_outputs

if TYPE_CHECKING:
    from npa_pulumi.kube.client import KubeClient

# What every gate judges: the cluster, where its API answers, and its node groups (a replaced node group,
# or a cluster recreated under the same id, runs the gate again).
CLUSTER_JUDGED = ("cluster_id", "context", "server", "node_group_ids")
# The outputs every gate records, unset until its provider runs.
GATE_OUTPUTS = {"passed": None, "lifecycle": None, "evidence": None}


@dataclass(frozen=True, kw_only=True)
class GateArgs(FleetResourceArgs):
    tenant_id: str
    region: str
    cluster_id: Input[str]
    context: str
    node_group_ids: Input[list[str]]  # judged: a replaced node group runs the gate again
    server: Input[str]  # judged: a cluster recreated under the same id answers elsewhere


class GateInputs(FleetResourceInputs):
    cluster_id: str
    context: str


class GateOutputs(ProviderModel):
    passed: bool
    # deployed | deployed-validation-failed | deployed-mig-not-ready | deployed-credentials-failed, or ""
    # (a fabric check the health gate did not pass: the gate's state stands)
    lifecycle: str
    evidence: dict[str, Any]


def cluster_clients(inputs: GateInputs) -> Callable[[float], KubeClient]:
    """Clients of the cluster's API (`client_for(timeout_s)`: each call waits at most `timeout_s`), from a
    kubeconfig the cloud gives now; raises what the cloud raises when it refuses the credentials."""
    from npa_pulumi.kube.client import KubeClient
    from npa_pulumi.kube.kubeconfig import dump

    cloud = cloud_for(inputs.cloud, inputs.profile, inputs.region, inputs.tenant_id)
    kubeconfig = dump(cloud.cluster_access(inputs.cluster_id).kubeconfig(inputs.context))

    def client_for(timeout_s: float) -> KubeClient:
        return KubeClient.from_kubeconfig(kubeconfig, timeout_s=timeout_s)

    return client_for


class GateProvider(ResourceProvider):
    """A gate's provider: a subclass names its inputs model, its id prefix, what it judges besides the
    cluster, and how it runs."""

    inputs_model: ClassVar[type[GateInputs]]
    id_prefix: ClassVar[str]
    judged: ClassVar[tuple[str, ...]]  # besides CLUSTER_JUDGED

    def run(self, inputs: Any) -> GateOutputs:
        raise NotImplementedError

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = self.inputs_model.model_validate(props)
        return CreateResult(
            id_=f"{self.id_prefix}-{inputs.cluster_id}", outs=with_outputs(props, self.run(inputs))
        )

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in (*CLUSTER_JUDGED, *self.judged) if olds.get(k) != news.get(k)]
        return DiffResult(
            changes=bool(changed) or not olds.get("passed"), replaces=[], delete_before_replace=False
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=with_outputs(news, self.run(self.inputs_model.model_validate(news))))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)  # a refresh does not re-run the gate

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None
