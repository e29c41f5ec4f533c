"""Issue 58, item 5 on soperator, against a real API server with kwok nodes and the local cloud's simulated
soperator (its cluster agent), without the engine: a disruptive change's drain of the Slurm workers
(engine/health/actions.py `ChangeDrain`, the wait of kube/drain.py) goes through the nodes' `SlurmNodeDrain`
condition, is waited for until every worker reports `NodeDrained`, names a worker still running a Slurm job
at the timeout, and lifts only its own drains (one made before by someone else stays)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from npa_pulumi.engine.backends.soperator import SLURM
from npa_pulumi.engine.health import actions
from npa_pulumi.kube import drain as kd
from npa_pulumi.kube.client import KubeClient
from npa_pulumi.kube.kubeconfig import dump
from npa_pulumi.simulator.cloud import LocalCloud
from npa_pulumi.simulator.kube import slurm
from npa_pulumi.simulator.simulator import LocalSimulator

pytestmark = pytest.mark.integration

RECIPE = {"name": "soperator", "namespace": "soperator", "nodesets": [{"name": "cpu", "size": 2}]}
REASON = "npa-pulumi: disruptive change module.k8s.node_group.worker"


class Cluster:
    def __init__(self, sim: LocalSimulator, cluster_id: str, kubeconfig: str) -> None:
        self.sim, self.id, self.kubeconfig = sim, cluster_id, kubeconfig

    def client(self) -> KubeClient:
        return KubeClient.from_kubeconfig(self.kubeconfig, timeout_s=10.0)

    def workers(self) -> list[str]:
        found = self.client().list("/api/v1/nodes", label_selector=SLURM.workers)
        return sorted(n["metadata"]["name"] for n in found)

    def drain(self, node: str) -> tuple[str, str, str] | None:
        found = self.client().get(f"/api/v1/nodes/{node}")
        conditions = (found.get("status") or {}).get("conditions") or []
        mine = [c for c in conditions if c.get("type") == slurm.DRAIN_CONDITION]
        return (mine[0]["status"], mine[0]["reason"], mine[0].get("message", "")) if mine else None

    def clear_drains(self) -> None:
        """Every worker back to no drain asked (a condition False, as after a release)."""
        for node in self.workers():
            condition = {"type": slurm.DRAIN_CONDITION, "status": "False", "reason": "NodeUndrained"}
            body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
            self.client().apply(
                f"/api/v1/nodes/{node}/status", body | {"status": {"conditions": [condition]}}, "test"
            )
            self.sim.set_slurm_jobs(self.id, node, 0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("slurm-drain") / "local-cloud"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "1")
        sim = LocalSimulator(directory)
        sim.initialise()
        project = sim.list_projects(sim.principal()["tenant_id"])[0]["id"]
        subnet = sim.list_subnets(project)[0]["id"]
        created = sim.provision("cluster", 60, project_id=project, name="slurm", subnet_id=subnet)
        sim.set_cluster_addons(created["id"], {"soperator": json.dumps(RECIPE)})
        for name, count, labels in [
            ("controller", 1, {slurm.ROLE_LABEL: "controller"}),
            ("worker-cpu-0", 2, {slurm.ROLE_LABEL: "worker", slurm.NODESET_LABEL: "cpu"}),
        ]:
            sim.provision(
                "node_group",
                60,
                cluster_id=created["id"],
                name=name,
                node_count=count,
                platform="cpu-d3",
                preset="4vcpu-16gb",
                labels=labels,
            )
        access = LocalCloud(directory).cluster_access(created["id"])
        found = Cluster(sim, created["id"], dump(access.kubeconfig("slurm")))
        deadline = time.monotonic() + 60
        while len(found.workers()) < 2:
            assert time.monotonic() < deadline, "the workers never joined"
            time.sleep(0.5)
        try:
            yield found
        finally:
            sim.reset()


def _wait(drain: actions.ChangeDrain, timeout_s: float) -> kd.JobWait:
    return kd.wait_for_jobs(drain.busy, timeout_s, poll_s=0.5)


def _settled(cluster: Cluster, node: str, wanted: tuple[str, str, str], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while cluster.drain(node) != wanted:
        assert time.monotonic() < deadline, f"{node}: {cluster.drain(node)}, not {wanted}"
        time.sleep(0.3)


def test_every_worker_drains_the_job_ends_and_the_drains_are_lifted(cluster: Cluster) -> None:
    busy, idle = cluster.workers()
    cluster.sim.set_slurm_jobs(cluster.id, busy, 1)
    ends = threading.Timer(4.0, lambda: cluster.sim.set_slurm_jobs(cluster.id, busy, 0))
    ends.start()
    try:
        drain = actions.ChangeDrain(cluster.client(), SLURM, REASON)
        waited = _wait(drain, 60.0)
    finally:
        ends.join()
    assert waited.cleared and waited.waited_s >= 3.5, waited  # the job ran 4 s into the wait
    assert waited.seen == (f"{busy} (DRAINING)", f"{idle} (DRAINING)")  # both asked at once
    for worker in (busy, idle):
        assert cluster.drain(worker) == ("True", slurm.DRAINED, REASON)
    others = [n["metadata"]["name"] for n in cluster.client().list("/api/v1/nodes")]
    controller = [n for n in others if n not in (busy, idle)]
    assert controller and all(cluster.drain(n) is None for n in controller)  # not a worker: never drained
    assert drain.lift() == [busy, idle]
    for worker in (busy, idle):  # the operator and kwok leave a released drain as it is
        _settled(cluster, worker, ("False", "NodeUndrained", REASON))
    time.sleep(3.0)
    assert [cluster.drain(w) for w in (busy, idle)] == [("False", "NodeUndrained", REASON)] * 2


def test_a_job_past_the_timeout_is_named_and_a_drain_from_before_is_kept(cluster: Cluster) -> None:
    cluster.clear_drains()
    busy, before = cluster.workers()
    cluster.sim.set_slurm_jobs(cluster.id, busy, 2)
    actions.ask_drain(cluster.client(), before, SLURM, "maint", field_manager="someone-else")
    _settled(cluster, before, ("True", slurm.DRAINED, "maint"))
    try:
        drain = actions.ChangeDrain(cluster.client(), SLURM, REASON)
        waited = _wait(drain, 5.0)
        assert not waited.cleared and waited.still == (f"{busy} (DRAIN+ALLOC)",), waited
        assert drain.kept == {before} and list(drain.asked) == [busy]
        assert drain.lift() == [busy]
    finally:
        cluster.sim.set_slurm_jobs(cluster.id, busy, 0)
    _settled(cluster, busy, ("False", "NodeUndrained", REASON))
    assert cluster.drain(before) == ("True", slurm.DRAINED, "maint")  # someone else's: as it was
