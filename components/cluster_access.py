"""`ClusterCredentials`: the stack step that retrieves a cluster's kubeconfig (on Nebius what
`nebius mk8s cluster get-credentials` writes: the CLI as an exec credential plugin pinned to the fleet's
profile; on the local cloud a client certificate for its API server).

It is the product's own dynamic provider because the Pulumi Command provider cannot be obtained here (see
README, known gaps). Its inputs are what the credentials depend on (the cluster and its node groups), so it
runs again exactly when they change; `refresh` fetches them again too. The kubeconfig is a secret output:
encrypted in state, never shown.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from npa_pulumi.bridge.orphans import watch_run

watch_run()  # in the provider host: stop with the run that started it (npa_pulumi/bridge/orphans.py)

# A change of these fetches new credentials (a new cluster, or node groups replaced: what the later
# in-cluster steps must see again); the rest only describes where the cloud is.
_REFETCH_KEYS = ("cluster_id", "context", "node_group_ids")


def fetch_kubeconfig(props: dict[str, Any]) -> tuple[str, str]:
    """(kubeconfig YAML, API server address) for the cluster in `props`."""
    from npa_pulumi.components._cloud import cloud_for

    from npa_pulumi.kube.kubeconfig import dump

    access = cloud_for(props).cluster_access(props["cluster_id"])
    return dump(access.kubeconfig(props["context"])), access.server


class ClusterCredentialsProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        kubeconfig, server = fetch_kubeconfig(props)
        return CreateResult(
            id_=props["cluster_id"], outs={**props, "kubeconfig": kubeconfig, "server": server}
        )

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in _REFETCH_KEYS if olds.get(k) != news.get(k)]
        described = [k for k in ("cloud", "profile", "tenant_id", "region") if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed or described), replaces=[], delete_before_replace=False)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        kubeconfig, server = fetch_kubeconfig(news)
        return UpdateResult(outs={**news, "kubeconfig": kubeconfig, "server": server})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        kubeconfig, server = fetch_kubeconfig(props)
        return ReadResult(id_=id_, outs={**props, "kubeconfig": kubeconfig, "server": server})

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        # Nothing to delete in the cloud: the kubeconfig files the engine wrote are removed once the stack
        # is gone (npa_pulumi/engine/kubeconfigs.py).
        return None


class ClusterCredentials(pulumi.dynamic.Resource, module="npa", name="ClusterCredentials"):
    kubeconfig: pulumi.Output[str]
    server: pulumi.Output[str]

    def __init__(self, resource_name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
        )
        super().__init__(
            ClusterCredentialsProvider(), resource_name, {**props, "kubeconfig": None, "server": None}, opts
        )
