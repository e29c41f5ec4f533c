"""The shared-filesystem check behind `verify-storage`, run directly against a real API server with kwok
nodes: the cluster's agent provisions the RWX claim on the shared filesystem and answers each probe pod
from its model of the node (a real directory per filesystem), so a healthy cluster passes with every
worker's payload read back by every other, a worker whose filesystem is not mounted fails closed on that
worker only, and no probe object (pod, claim, volume) or probe file is left either way."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from npa_pulumi.kube.client import KubeClient
from npa_pulumi.kube.kubeconfig import dump
from npa_pulumi.kube.storage_check import RUN_LABEL, StorageConfig, run_storage_check
from npa_pulumi.simulator.cloud import LocalCloud
from npa_pulumi.simulator.kube.storage import DATA_DIR, filesystem_dir
from npa_pulumi.simulator.simulator import LocalSimulator

pytestmark = pytest.mark.integration

MOUNT = {"path": "/mnt/data", "tag": "csi-storage", "fs_type": "virtiofs", "options": "defaults,nofail"}
SIZE_GIB = 2


class Cluster:
    def __init__(self, sim: LocalSimulator, cluster_id: str, filesystem_id: str, kubeconfig: str) -> None:
        self.sim, self.id, self.filesystem_id, self.kubeconfig = sim, cluster_id, filesystem_id, kubeconfig

    def client(self, timeout_s: float = 5.0) -> KubeClient:
        return KubeClient.from_kubeconfig(self.kubeconfig, timeout_s=timeout_s)

    def check(self, **overrides: Any) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "expected_workers": 3,
            "mount_path": MOUNT["path"],
            "mount_tag": MOUNT["tag"],
            "size_gib": SIZE_GIB,
            "timeout_s": 40.0,
        }
        return run_storage_check(lambda t: self.client(t), StorageConfig(**{**settings, **overrides}))

    def nodes(self) -> list[str]:
        return sorted(n["metadata"]["name"] for n in self.client().list("/api/v1/nodes"))

    def assert_nothing_left(self) -> None:
        client = self.client()
        assert client.list("/api/v1/pods", RUN_LABEL) == []
        assert client.list("/api/v1/persistentvolumeclaims", RUN_LABEL) == []
        assert client.list("/api/v1/persistentvolumes") == []
        root = filesystem_dir(self.sim.directory, self.filesystem_id)
        assert not list((root / DATA_DIR).iterdir()) if (root / DATA_DIR).exists() else True
        assert (
            not list((root / ".npa-storage-probes").iterdir())
            if (root / ".npa-storage-probes").exists()
            else True
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("storage-check") / "local-cloud"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "1")
        sim = LocalSimulator(directory)
        sim.initialise()
        project = sim.list_projects(sim.principal()["tenant_id"])[0]["id"]
        subnet = sim.list_subnets(project)[0]["id"]
        filesystem = sim.create_filesystem(project, "shared", SIZE_GIB * 1024**3)
        created = sim.provision("cluster", 60, project_id=project, name="storage", subnet_id=subnet)
        sim.set_cluster_addons(created["id"], {"gpu_driver": "", "filestore": True})
        attachment = {
            "filesystem_id": filesystem["id"],
            "attach_mode": "READ_WRITE",
            "mount_tag": MOUNT["tag"],
        }
        for name, count in (("cpu", 2), ("cpu2", 1)):
            sim.provision(
                "node_group", 60, cluster_id=created["id"], name=name, node_count=count,
                platform="cpu-d3", preset="4vcpu-16gb", filesystems=[attachment], mount=dict(MOUNT),
            )  # fmt: skip
        access = LocalCloud(directory).cluster_access(created["id"])
        found = Cluster(sim, created["id"], filesystem["id"], dump(access.kubeconfig("storage")))
        client = found.client()
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "npa-system"}}
        client.apply("/api/v1/namespaces/npa-system", namespace, "test")
        deadline = time.monotonic() + 30
        while (
            len(found.nodes()) < 3
            or client.get_or_none("/apis/storage.k8s.io/v1/storageclasses/csi-mounted-fs-path-sc") is None
        ):
            assert time.monotonic() < deadline, "the agent never registered the nodes and the class"
            time.sleep(0.3)
        try:
            yield found
        finally:
            sim.reset()


def test_a_healthy_cluster_passes_on_every_worker(cluster: Cluster) -> None:
    evidence = cluster.check()
    assert evidence["passed"], evidence
    assert sorted(evidence["nodes"]) == cluster.nodes()
    for verdict in evidence["nodes"].values():
        assert verdict["host_mount"] and verdict["fstab_nofail"] and verdict["capacity"]
        assert verdict["host_io"] and verdict["shared_write"] and verdict["shared_read"]
        assert verdict["capacity_gib"] == SIZE_GIB and verdict["cleanup"] is True
    assert evidence["cleanup"] == {"objects_created": 7, "all_removed": True}  # 1 claim + 2 x 3 pods
    cluster.assert_nothing_left()


def test_a_worker_without_the_mount_fails_closed_on_that_worker(cluster: Cluster) -> None:
    bad = cluster.nodes()[1]
    cluster.sim.set_node_fault(cluster.id, bad, "storage_unavailable")
    try:
        evidence = cluster.check()
    finally:
        cluster.sim.set_node_fault(cluster.id, bad, "storage_unavailable", active=False)
    assert not evidence["passed"]
    assert evidence["failures"] and all(f.startswith(f"{bad}: ") for f in evidence["failures"]), evidence
    assert not evidence["nodes"][bad]["host_mount"] and evidence["nodes"][bad]["fstab_nofail"]
    assert "not mounted" in evidence["nodes"][bad]["error"]
    good = [n for n in cluster.nodes() if n != bad]
    assert all(evidence["nodes"][n]["host_mount"] and evidence["nodes"][n]["shared_write"] for n in good)
    cluster.assert_nothing_left()


def test_a_wrong_declaration_or_worker_count_fails_without_creating_anything(cluster: Cluster) -> None:
    wrong_size = cluster.check(size_gib=SIZE_GIB + 1)
    assert not wrong_size["passed"]
    assert all("capacity failed" in f for f in wrong_size["failures"]), wrong_size["failures"]
    missing = cluster.check(expected_workers=4)
    assert not missing["passed"] and missing["cleanup"]["objects_created"] == 0
    assert missing["failures"] == ["3 worker(s) registered, 4 expected"]
    no_class = cluster.check(storage_class="no-such-class")
    assert no_class["failures"] == ["StorageClass no-such-class not found"]
    other_driver = cluster.check(driver="other.csi.example.com")
    assert other_driver["failures"] == [
        "StorageClass csi-mounted-fs-path-sc: provisioner 'mounted-fs-path.csi.nebius.ai', "
        "other.csi.example.com expected",
        "CSIDriver other.csi.example.com not registered",
    ]
    cluster.assert_nothing_left()
