"""One command's reads of the live cloud, batched per project.

A fleet-wide read (`status`, the no-op check of `up` and `preview`) asks the same few questions of every
cluster: does the cluster exist and run, are its node groups at their target, do the objects its recipe
declared still exist. Asked per cluster, that is four or five calls per cluster; asked per project, it is
four list calls per project (clusters, node groups, filesystems, GPU clusters) however many clusters the
project holds. `ProjectReads` answers the per-object questions from those lists, with the port's own
method names and errors (a missing object raises `NotFound`), so the code that checks one cluster does
not change. The lists are read once, when a project is first asked about, and kept for the command: a
command that changes a project's objects takes a fresh `ProjectReads`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

from npa_pulumi.cloud.errors import NotFound
from npa_pulumi.cloud.port import CloudPort, Cluster, Filesystem, GpuCluster, NodeGroup


class LiveReader(Protocol):
    """The reads a live check makes of one cluster: the port itself, or a project's batched reads."""

    def get_cluster(self, cluster_id: str) -> Cluster: ...
    def list_node_groups(self, cluster_id: str) -> list[NodeGroup]: ...
    def get_node_group(self, node_group_id: str) -> NodeGroup: ...
    def list_filesystems(self, project_id: str) -> list[Filesystem]: ...
    def list_gpu_clusters(self, project_id: str) -> list[GpuCluster]: ...


@dataclass(frozen=True)
class ProjectListing:
    """Everything of one project the live checks look at, from one list call per kind."""

    clusters: dict[str, Cluster]
    node_groups: dict[str, NodeGroup]
    filesystems: list[Filesystem]
    gpu_clusters: list[GpuCluster]
    groups_of: dict[str, list[NodeGroup]] = field(default_factory=dict)

    @classmethod
    def read(cls, cloud: CloudPort, project_id: str) -> ProjectListing:
        clusters = {c.id: c for c in cloud.list_clusters(project_id)}
        groups = cloud.list_project_node_groups(project_id, list(clusters))
        groups_of: dict[str, list[NodeGroup]] = {cluster_id: [] for cluster_id in clusters}
        for group in groups:
            groups_of.setdefault(group.cluster_id, []).append(group)
        return cls(
            clusters=clusters,
            node_groups={g.id: g for g in groups},
            filesystems=cloud.list_filesystems(project_id),
            gpu_clusters=cloud.list_gpu_clusters(project_id),
            groups_of=groups_of,
        )


class ProjectReads:
    """The per-object reads of one project (the port's names), answered from its listing."""

    def __init__(self, listing: ProjectListing, project_id: str) -> None:
        self._listing = listing
        self.project_id = project_id

    def get_cluster(self, cluster_id: str) -> Cluster:
        cluster = self._listing.clusters.get(cluster_id)
        if cluster is None:
            raise NotFound(f"cluster {cluster_id} not found in project {self.project_id}")
        return cluster

    def list_node_groups(self, cluster_id: str) -> list[NodeGroup]:
        self.get_cluster(cluster_id)
        return list(self._listing.groups_of.get(cluster_id, []))

    def get_node_group(self, node_group_id: str) -> NodeGroup:
        group = self._listing.node_groups.get(node_group_id)
        if group is None:
            raise NotFound(f"node group {node_group_id} not found in project {self.project_id}")
        return group

    def list_filesystems(self, project_id: str) -> list[Filesystem]:
        return list(self._listing.filesystems) if project_id == self.project_id else []

    def list_gpu_clusters(self, project_id: str) -> list[GpuCluster]:
        return list(self._listing.gpu_clusters) if project_id == self.project_id else []


class FleetReads:
    """The listings of every project a command asks about, each read once (thread-safe: the fleet's
    worker pool asks for the same project from several threads; one of them reads, the others wait)."""

    def __init__(self, cloud: CloudPort) -> None:
        self._cloud = cloud
        self._listings: dict[str, ProjectListing] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def project(self, project_id: str) -> LiveReader:
        """The project's reads; errors of the list calls (the project gone, no access) propagate. Without
        a project id (a stack that recorded none), the port itself."""
        if not project_id:
            return self._cloud
        with self._guard:
            lock = self._locks.setdefault(project_id, threading.Lock())
        with lock:
            if project_id not in self._listings:
                self._listings[project_id] = ProjectListing.read(self._cloud, project_id)
            return ProjectReads(self._listings[project_id], project_id)
