"""The Nebius adapter's Managed Kubernetes clusters, node groups, filesystems and GPU clusters; the
project's instances, disks and container registries (what a project deletion must find none of)."""

from __future__ import annotations

from collections.abc import Sequence

from ...kube.kubeconfig import ClusterAccess, ExecCredential
from ..port import (
    DEFAULT_OPERATION_TIMEOUT_S,
    Cluster,
    Disk,
    Filesystem,
    GpuCluster,
    Instance,
    NodeGroup,
    Registry,
)
from . import convert
from .client import (
    NebiusClient,
)
from .endpoints import storage_endpoint


class KubernetesAndCompute(NebiusClient):
    """The Nebius adapter's Managed Kubernetes clusters, node groups, filesystems and GPU clusters; the
    project's instances, disks and container registries (what a project deletion must find none of)."""

    # ------------------------------------------------------------------ Managed Kubernetes and compute

    def get_cluster(self, cluster_id: str) -> Cluster:
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "ClusterServiceClient")
        return convert.cluster(
            self._read(
                "mk8s.v1.ClusterService.Get",
                {"id": cluster_id},
                lambda kw: client.get(mk8s.GetClusterRequest(id=cluster_id), **kw),
            )
        )

    def kubernetes_api_available(self) -> bool:
        return True

    def object_storage_endpoint(self, region: str) -> str:
        return storage_endpoint(self.settings, region)  # the one the adapter's own S3 calls use

    def cluster_access(self, cluster_id: str) -> ClusterAccess:
        """The cluster's public endpoint and CA from the API, and the `nebius` CLI as the exec credential
        plugin pinned to this adapter's profile (as `nebius mk8s cluster get-credentials` writes it), so
        kubectl keeps authenticating as this fleet's principal, whatever profile is active later."""
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "ClusterServiceClient")
        raw = self._read(
            "mk8s.v1.ClusterService.Get",
            {"id": cluster_id},
            lambda kw: client.get(mk8s.GetClusterRequest(id=cluster_id), **kw),
        )
        record = convert.cluster(raw)
        profile = ["--profile", self.identity.profile] if self.identity.profile else []
        credential = ExecCredential(
            "nebius", ("--no-browser", "mk8s", "v1", "cluster", "get-token", *profile, "--format", "json")
        )
        return ClusterAccess(
            record.endpoint, raw.status.control_plane.auth.cluster_ca_certificate, credential
        )

    def list_clusters(self, project_id: str) -> list[Cluster]:
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "ClusterServiceClient")
        items = self._list(
            "mk8s.v1.ClusterService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                mk8s.ListClustersRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.cluster(c) for c in items]

    def delete_cluster(self, cluster_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "ClusterServiceClient")
        self._mutate(
            "mk8s.v1.ClusterService.Delete",
            {"id": cluster_id},
            lambda kw: client.delete(mk8s.DeleteClusterRequest(id=cluster_id), **kw),
            timeout_s,
        )

    def get_node_group(self, node_group_id: str) -> NodeGroup:
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "NodeGroupServiceClient")
        return convert.node_group(
            self._read(
                "mk8s.v1.NodeGroupService.Get",
                {"id": node_group_id},
                lambda kw: client.get(mk8s.GetNodeGroupRequest(id=node_group_id), **kw),
            )
        )

    def list_node_groups(self, cluster_id: str) -> list[NodeGroup]:
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "NodeGroupServiceClient")
        items = self._list(
            "mk8s.v1.NodeGroupService.List",
            {"parent_id": cluster_id},
            lambda token, kw: client.list(
                mk8s.ListNodeGroupsRequest(parent_id=cluster_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.node_group(ng) for ng in items]

    def list_project_node_groups(self, project_id: str, cluster_ids: Sequence[str]) -> list[NodeGroup]:
        # mk8s lists node groups per cluster only (NodeGroupService.List's parent is a cluster).
        return [group for cluster_id in cluster_ids for group in self.list_node_groups(cluster_id)]

    def delete_node_group(self, node_group_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "NodeGroupServiceClient")
        self._mutate(
            "mk8s.v1.NodeGroupService.Delete",
            {"id": node_group_id},
            lambda kw: client.delete(mk8s.DeleteNodeGroupRequest(id=node_group_id), **kw),
            timeout_s,
        )

    def list_filesystems(self, project_id: str) -> list[Filesystem]:
        compute = self._api("compute.v1")
        client = self._client("compute.v1", "FilesystemServiceClient")
        items = self._list(
            "compute.v1.FilesystemService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                compute.ListFilesystemsRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.filesystem(fs) for fs in items]

    def list_gpu_clusters(self, project_id: str) -> list[GpuCluster]:
        compute = self._api("compute.v1")
        client = self._client("compute.v1", "GpuClusterServiceClient")
        items = self._list(
            "compute.v1.GpuClusterService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                compute.ListGpuClustersRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.gpu_cluster(g) for g in items]

    def list_instances(self, project_id: str) -> list[Instance]:
        compute = self._api("compute.v1")
        client = self._client("compute.v1", "InstanceServiceClient")
        items = self._list(
            "compute.v1.InstanceService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                compute.ListInstancesRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.instance(i) for i in items]

    def list_disks(self, project_id: str) -> list[Disk]:
        compute = self._api("compute.v1")
        client = self._client("compute.v1", "DiskServiceClient")
        items = self._list(
            "compute.v1.DiskService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                compute.ListDisksRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.disk(d) for d in items]

    def list_registries(self, project_id: str) -> list[Registry]:
        registry = self._api("registry.v1")
        client = self._client("registry.v1", "RegistryServiceClient")
        items = self._list(
            "registry.v1.RegistryService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                registry.ListRegistriesRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.registry(r) for r in items]
