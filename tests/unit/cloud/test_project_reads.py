"""Fleet-wide reads batched per project (npa_pulumi/cloud/project_reads.py): the per-object answers are
the port's own, each project is listed once however many threads ask, and what is missing is NotFound."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pytest

from npa_pulumi.cloud.errors import NotFound
from npa_pulumi.cloud.port import CloudPort, Cluster, Filesystem, GpuCluster, NodeGroup
from npa_pulumi.cloud.project_reads import FleetReads


class ListingCloud:
    """The four list calls of a cloud with two projects, counting how often each project is listed."""

    def __init__(self) -> None:
        self.listed: dict[str, int] = {}
        self.clusters = {
            "p1": [Cluster(id="c1", project_id="p1", name="a", state="RUNNING")],
            "p2": [Cluster(id="c2", project_id="p2", name="b", state="PROVISIONING")],
        }
        self.groups = {
            "p1": [
                NodeGroup(id="g1", cluster_id="c1", name="cpu", state="RUNNING", target_node_count=2),
                NodeGroup(id="g2", cluster_id="c1", name="gpu", state="RUNNING", target_node_count=1),
            ],
            "p2": [],
        }

    def list_clusters(self, project_id: str) -> list[Cluster]:
        self.listed[project_id] = self.listed.get(project_id, 0) + 1
        if project_id not in self.clusters:
            raise NotFound(f"project {project_id} not found")
        return self.clusters[project_id]

    def list_project_node_groups(self, project_id: str, cluster_ids: list[str]) -> list[NodeGroup]:
        assert cluster_ids == [c.id for c in self.clusters[project_id]]  # the clusters just listed
        return self.groups[project_id]

    def list_filesystems(self, project_id: str) -> list[Filesystem]:
        return []

    def list_gpu_clusters(self, project_id: str) -> list[GpuCluster]:
        return [GpuCluster(id=f"gc-{project_id}", project_id=project_id, name="fabric", fabric="fabric-3")]

    def get_cluster(self, cluster_id: str) -> Any:
        raise AssertionError("a batched read asked the cloud for one cluster")


def test_each_project_is_listed_once_and_answers_per_object() -> None:
    cloud = ListingCloud()
    reads = FleetReads(cast(CloudPort, cloud))
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: reads.project("p1").get_cluster("c1").name, range(32)))
    assert answers == ["a"] * 32 and cloud.listed == {"p1": 1}
    p1 = reads.project("p1")
    assert [g.id for g in p1.list_node_groups("c1")] == ["g1", "g2"]
    assert p1.get_node_group("g2").target_node_count == 1
    assert [g.id for g in p1.list_gpu_clusters("p1")] == ["gc-p1"] and p1.list_filesystems("p1") == []
    assert reads.project("p2").list_node_groups("c2") == []
    assert cloud.listed == {"p1": 1, "p2": 1}


def test_what_the_listing_lacks_is_not_found() -> None:
    reads = FleetReads(cast(CloudPort, ListingCloud()))
    p1 = reads.project("p1")
    with pytest.raises(NotFound, match="c2"):
        p1.get_cluster("c2")  # another project's cluster is not this project's
    with pytest.raises(NotFound):
        p1.list_node_groups("c9")
    with pytest.raises(NotFound):
        p1.get_node_group("g9")
    with pytest.raises(NotFound, match="project gone"):
        reads.project("gone")
