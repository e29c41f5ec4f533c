"""`ClusterCredentials`: the stack step that retrieves a cluster's kubeconfig (on Nebius what
`nebius mk8s cluster get-credentials` writes: the CLI as an exec credential plugin pinned to the fleet's
profile; on the local cloud a client certificate for its API server).

It is the product's own dynamic provider because the Pulumi Command provider cannot be obtained here (see
docs/toolchain.md, known gaps). Its inputs are what the credentials depend on (the cluster and its node
groups), so it runs again exactly when they change; `refresh` fetches them again too. The kubeconfig is a
secret output: encrypted in state, never shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi import Input
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from npa_pulumi.cloud.errors import CloudError
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

# A change of these fetches new credentials (a new cluster, or node groups replaced: what the later
# in-cluster steps must see again); the rest only says where the cloud is.
_REFETCH_KEYS = ("cluster_id", "context", "node_group_ids", "cloud", "profile", "tenant_id", "region")


@dataclass(frozen=True, kw_only=True)
class ClusterCredentialsArgs(FleetResourceArgs):
    tenant_id: str
    region: str
    cluster_id: Input[str]
    context: str  # the kube context (and cluster/user) name in the kubeconfig
    node_group_ids: Input[list[str]]


class ClusterCredentialsInputs(FleetResourceInputs):
    cluster_id: str
    context: str


class ClusterCredentialsOutputs(ProviderModel):
    kubeconfig: str
    server: str


def fetch_kubeconfig(inputs: ClusterCredentialsInputs) -> ClusterCredentialsOutputs:
    from npa_pulumi.kube.kubeconfig import dump

    access = cloud_for(inputs.cloud, inputs.profile, inputs.region, inputs.tenant_id).cluster_access(
        inputs.cluster_id
    )
    return ClusterCredentialsOutputs(kubeconfig=dump(access.kubeconfig(inputs.context)), server=access.server)


def _credentials_moved(olds: dict[str, Any], news: dict[str, Any]) -> bool:
    """Whether the cluster behind unchanged inputs now answers with other credentials (a cluster
    recreated under the same id has a new CA and API server). Best effort: a cluster that cannot be
    asked (not there yet, or an input still unknown in a preview) counts as unchanged."""
    if (
        not isinstance(news.get("cluster_id"), str)
        or not news.get("cluster_id")
        or not olds.get("kubeconfig")
    ):
        return False
    try:
        live = fetch_kubeconfig(ClusterCredentialsInputs.model_validate(news))
    except (CloudError, ValueError):
        return False
    return bool(live.kubeconfig != olds["kubeconfig"])


class ClusterCredentialsProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = ClusterCredentialsInputs.model_validate(props)
        return CreateResult(id_=inputs.cluster_id, outs=with_outputs(props, fetch_kubeconfig(inputs)))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in _REFETCH_KEYS if olds.get(k) != news.get(k)]
        if not changed and _credentials_moved(olds, news):
            changed = ["kubeconfig"]
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        inputs = ClusterCredentialsInputs.model_validate(news)
        return UpdateResult(outs=with_outputs(news, fetch_kubeconfig(inputs)))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        inputs = ClusterCredentialsInputs.model_validate(props)
        try:
            return ReadResult(id_=id_, outs=with_outputs(props, fetch_kubeconfig(inputs)))
        except CloudError:
            # The cluster is gone or not reachable (deleted outside the fleet): keep what state has, so the
            # refresh goes on and the update that recreates the cluster fetches its credentials anew.
            return ReadResult(id_=id_, outs=props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        # Nothing to delete in the cloud: the kubeconfig files the engine wrote are removed once the stack
        # is gone (npa_pulumi/engine/registrations/kubeconfigs.py).
        return None


class ClusterCredentials(pulumi.dynamic.Resource, module="npa", name="ClusterCredentials"):
    kubeconfig: pulumi.Output[str]
    server: pulumi.Output[str]

    def __init__(
        self, resource_name: str, args: ClusterCredentialsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
        )
        props = {**as_props(args), "kubeconfig": None, "server": None}
        super().__init__(ClusterCredentialsProvider(), resource_name, props, opts)
