"""Issue 58, item 5 on soperator: before a disruptive change `up` drains every Slurm worker through
soperator's `SlurmNodeDrain` condition (engine/health/actions.py `ChangeDrain`) and waits for each to report
`NodeDrained`; at the timeout the cluster is not changed, the workers still running jobs are named and the
drains the wait asked for are lifted (a worker drained by someone else before stays drained); `--force`
drains nothing.

The cluster's API is a stand-in that keeps nodes and merges a node's conditions by type (as server-side
apply of the status does); soperator is the local cloud's simulated operator (simulator/kube/slurm.py
`SlurmOperator`), which moves the drains on from the Slurm jobs of the cluster record."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace
from typing import Any

import pytest
from fake_clock import Clock

from npa_pulumi.engine import liveness
from npa_pulumi.engine.backends.soperator import SLURM
from npa_pulumi.engine.health import actions
from npa_pulumi.engine.operations import up
from npa_pulumi.engine.requests import UpRequest
from npa_pulumi.kube import drain as kd
from npa_pulumi.output.results import StackResult
from npa_pulumi.simulator.kube import slurm
from npa_pulumi.spec.constants import BackendKind
from npa_pulumi.spec.models import MaintenanceSpec, WaitForJobsSpec

JSON = dict[str, Any]
STACK = "fleet-research-slurm"
RECIPE = {"name": "soperator", "namespace": "soperator", "nodesets": [{"name": "gpu", "size": 3}]}


class Cluster:
    """A soperator cluster's API as the drain reads and writes it, and its operator: the simulated one
    reconciles before every read of the nodes (it runs between the wait's reads on a real cluster)."""

    def __init__(self, jobs: dict[str, int]) -> None:
        self.nodes: dict[str, JSON] = {}
        for name, role in [("c0", "controller"), ("w0", "worker"), ("w1", "worker"), ("w2", "worker")]:
            labels = {slurm.ROLE_LABEL: role} | ({slurm.NODESET_LABEL: "gpu"} if role == "worker" else {})
            ready = {"type": "Ready", "status": "True", "reason": "KubeletReady"}
            self.nodes[name] = {
                "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
                "status": {"conditions": [ready]},
            }
        self.record: JSON = {"id": "c1", "addons": {"soperator": json.dumps(RECIPE)}, "slurm_jobs": jobs}
        self.operator = slurm.SlurmOperator()
        self.applied: list[tuple[str, str, JSON]] = []  # (field manager, node, condition)
        self.pods: list[JSON] = []

    def drained_by_someone_else(self, name: str, reason: str = slurm.DRAINED) -> None:
        condition = {"type": slurm.DRAIN_CONDITION, "status": "True", "reason": reason, "message": "maint"}
        self.nodes[name]["status"]["conditions"].append(condition)

    def drain(self, name: str) -> tuple[str, str, str] | None:
        found = [c for c in self.nodes[name]["status"]["conditions"] if c["type"] == slurm.DRAIN_CONDITION]
        return (found[0]["status"], found[0]["reason"], found[0]["message"]) if found else None

    # --- the API
    def list(self, path: str, label_selector: str = "") -> list[JSON]:
        if path == "/api/v1/pods":  # this stand-in matches `key=value` selectors only
            key, _, value = label_selector.partition("=")
            return [p for p in self.pods if p["metadata"]["labels"].get(key) == value]
        assert path == "/api/v1/nodes", path
        if label_selector:  # the drain's read: the operator has reconciled since the last one
            self.operator.sync(self, self.record, "soperator")
        key, _, value = label_selector.partition("=")
        return [
            copy.deepcopy(n)
            for n in self.nodes.values()
            if not key or n["metadata"]["labels"].get(key) == value
        ]

    def get_or_none(self, path: str) -> JSON | None:
        if not path.startswith("/api/v1/nodes/"):
            return None  # the operator's own objects: not this test's concern
        found = self.nodes.get(path.rsplit("/", 1)[1])
        return copy.deepcopy(found) if found is not None else None

    def apply(self, path: str, obj: JSON, field_manager: str) -> JSON:
        assert path.startswith("/api/v1/nodes/") and path.endswith("/status"), path
        node = self.nodes[path.split("/")[-2]]
        for condition in obj["status"]["conditions"]:
            kept = [c for c in node["status"]["conditions"] if c["type"] != condition["type"]]
            node["status"]["conditions"] = [*kept, condition]
            self.applied.append((field_manager, node["metadata"]["name"], condition))
        return node


def _wait(cluster: Cluster, drain: actions.ChangeDrain, timeout_s: float, clock: Clock) -> kd.JobWait:
    return kd.wait_for_jobs(drain.busy, timeout_s, poll_s=10, clock=clock, sleep=clock.sleep)


# ------------------------------------------------------------ against the simulated operator (no engine)


def test_every_worker_is_drained_and_the_wait_ends_once_the_last_job_ends() -> None:
    cluster = Cluster({"w0": 1})
    clock = Clock()
    drain = actions.ChangeDrain(cluster, SLURM, "npa-pulumi: disruptive change worker group")  # type: ignore[arg-type]

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.now >= 40:  # w0's job ends 40 s in
            cluster.record["slurm_jobs"] = {}

    waited = kd.wait_for_jobs(drain.busy, 600, poll_s=10, clock=clock, sleep=sleep)

    assert waited.cleared and waited.waited_s == 40
    assert waited.seen == ("w0 (DRAINING)", "w1 (DRAINING)", "w2 (DRAINING)")  # asked, not yet taken
    for worker in ("w0", "w1", "w2"):
        assert cluster.drain(worker) == (
            "True",
            slurm.DRAINED,
            "npa-pulumi: disruptive change worker group",
        )
    assert cluster.drain("c0") is None  # not a worker: never drained
    asked = [(m, n) for m, n, c in cluster.applied if c["reason"] == slurm.NEED_DRAIN]
    assert asked == [(actions.CHANGE_FIELD_MANAGER, w) for w in ("w0", "w1", "w2")]  # once each

    assert drain.lift() == ["w0", "w1", "w2"]
    assert cluster.drain("w0") == ("False", "NodeUndrained", "npa-pulumi: disruptive change worker group")
    cluster.list("/api/v1/nodes", slurm.NODESET_LABEL + "=gpu")  # the operator leaves a lifted drain be
    assert cluster.drain("w1") == ("False", "NodeUndrained", "npa-pulumi: disruptive change worker group")


def test_a_job_still_running_at_the_timeout_names_its_node_and_a_drain_from_before_is_kept() -> None:
    cluster = Cluster({"w0": 2, "w2": 1})
    cluster.drained_by_someone_else("w2", slurm.DRAINING)  # soperator's maintenance, a job still runs
    clock = Clock()
    drain = actions.ChangeDrain(cluster, SLURM, "npa-pulumi: disruptive change x")  # type: ignore[arg-type]

    waited = _wait(cluster, drain, 95, clock)

    assert not waited.cleared and waited.waited_s == 95
    assert waited.still == ("w0 (DRAIN+ALLOC)", "w2 (DRAIN+ALLOC)")
    assert drain.kept == {"w2"} and sorted(drain.asked) == ["w0", "w1"]
    assert drain.lift() == ["w0", "w1"]
    assert cluster.drain("w0") == ("False", "NodeUndrained", "npa-pulumi: disruptive change x")
    assert cluster.drain("w2") == ("True", slurm.DRAINING, "maint")  # as it was: someone else's
    assert not [n for _, n, _ in cluster.applied if n == "w2"]


def test_a_drain_an_earlier_change_left_is_taken_over_and_lifted() -> None:
    cluster = Cluster({})
    cluster.nodes["w1"]["status"]["conditions"].append(
        {
            "type": slurm.DRAIN_CONDITION,
            "status": "True",
            "reason": slurm.DRAINED,
            "message": "npa-pulumi: disruptive change earlier",  # its run was killed before lifting it
        }
    )
    drain = actions.ChangeDrain(cluster, SLURM, "npa-pulumi: disruptive change now")  # type: ignore[arg-type]
    assert _wait(cluster, drain, 60, Clock()).cleared
    assert drain.kept == set() and drain.lift() == ["w0", "w1", "w2"]


def test_a_worker_replaced_meanwhile_has_no_drain_to_lift() -> None:
    cluster = Cluster({})
    drain = actions.ChangeDrain(cluster, SLURM, "npa-pulumi: disruptive change x")  # type: ignore[arg-type]
    assert _wait(cluster, drain, 60, Clock()).cleared
    cluster.nodes["w0"]["metadata"]["uid"] = "uid-w0-new"  # the change replaced it under its name
    del cluster.nodes["w1"]  # and removed this one
    assert drain.lift() == ["w2"]


# ------------------------------------------------------------------------ `up` of a soperator cluster

DISRUPTIVE = {
    "resources": [
        {
            "address": "module.k8s.nebius_mk8s_v1_node_group.worker[0]",
            "disruption": {"class": "disruptive", "reason": "replaced"},
        }
    ]
}


class Context:
    """The fleet as `_up_cluster` reads it for one deployed soperator cluster; its update recorded."""

    def __init__(self, force: bool = False, backend: str = "soperator") -> None:
        self.backend = backend
        self.refreshing = False
        self.replacement_policy_enabled = False
        self.request = UpRequest(force=force)
        self.said: list[str] = []
        self.progress = SimpleNamespace(
            phase=lambda stack, phase, detail="": self.said.append(f"{phase}: {detail}"),
            message=self.said.append,
        )
        self.updates: list[str] = []
        self.executor = SimpleNamespace(run=self._run)

    def _run(self, op: Any, command: Any) -> StackResult:
        self.updates.append(str(command))
        result: StackResult = op.result("deployed")
        return result

    def stack_outputs(self, ops: Any) -> dict[str, JSON]:
        return {STACK: {"cluster_id": "mk8scluster-1", "backend": self.backend, "kube_context": STACK}}

    def cached_outputs(self, stack: str) -> JSON | None:
        return None

    def plans(self) -> Any:
        plan = SimpleNamespace(project_stack="fleet-research", backend=BackendKind(self.backend))
        return SimpleNamespace(cluster=lambda stack: plan)

    def remember_policy(self, plan: Any, result: Any) -> None:
        pass


def _op() -> Any:
    def result(status: str, **fields: Any) -> StackResult:
        return StackResult(stack=STACK, kind="cluster", project_key="research", status=status, **fields)

    return SimpleNamespace(stack=STACK, result=result)


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A deployed cluster whose Terraform plan replaces a worker group; `up` reaches `cluster`."""

    def reach(cluster: Cluster) -> None:
        monkeypatch.setattr(up, "_cluster_client", lambda context, op, outputs: cluster)

    monkeypatch.setattr(liveness, "needs_refresh", lambda context, stack: False)
    monkeypatch.setattr(up, "terraform_plan", lambda context, op, plan, outputs: DISRUPTIVE)
    return reach


def _block(timeout: str = "1s", selectors: list[str] | None = None) -> MaintenanceSpec:
    return MaintenanceSpec(wait_for_jobs=WaitForJobsSpec(timeout=timeout, selectors=selectors or []))


def test_up_applies_once_every_worker_is_drained_then_lifts_its_drains(deployed: Any) -> None:
    cluster = Cluster({})
    deployed(cluster)
    context = Context()
    result = up._up_cluster(context, _op(), _block())  # type: ignore[arg-type]
    assert not result.failed and context.updates == ["up"]
    reason = "npa-pulumi: disruptive change module.k8s.nebius_mk8s_v1_node_group.worker[0]"
    assert [c["message"] for _, _, c in cluster.applied if c["reason"] == slurm.NEED_DRAIN] == [reason] * 3
    for worker in ("w0", "w1", "w2"):  # lifted once the change was applied
        assert cluster.drain(worker) == ("False", "NodeUndrained", reason)
    assert "waiting for jobs: Slurm jobs on every worker (drained first) (up to 1s)" in context.said
    assert f"{STACK}: every job ended, 3 Slurm worker(s) drained after 1s; applying" in context.said
    assert any(
        "Slurm drains it asked for are lifted (3 of 3 node(s)) after the change" in s for s in context.said
    )


def test_up_at_the_timeout_changes_nothing_names_the_busy_workers_and_lifts_its_drains(deployed: Any) -> None:
    cluster = Cluster({"w1": 1})
    cluster.drained_by_someone_else("w2")  # drained (idle) before the wait: stays so
    deployed(cluster)
    context = Context()
    result = up._up_cluster(context, _op(), _block())  # type: ignore[arg-type]
    assert result.failed and context.updates == []  # the stack is not updated
    assert result.error is not None
    assert "job(s) still running after waiting 1s before a disruptive change" in result.error
    assert "Slurm node(s) still running jobs: w1 (DRAIN+ALLOC)" in result.error
    assert "the cluster is not changed, nothing was evicted" in result.error
    assert "the Slurm drains it asked for are lifted (2 of 2 node(s))" in result.error
    assert "1 worker(s) drained before it stay drained (w2)" in result.error
    lifted = cluster.drain("w0")
    assert lifted == cluster.drain("w1") and lifted is not None and lifted[:2] == ("False", "NodeUndrained")
    assert cluster.drain("w2") == ("True", slurm.DRAINED, "maint")


def test_up_force_drains_nothing(deployed: Any) -> None:
    cluster = Cluster({"w1": 1})
    deployed(cluster)
    context = Context(force=True)
    result = up._up_cluster(context, _op(), _block())  # type: ignore[arg-type]
    assert not result.failed and context.updates == ["up"]
    assert cluster.applied == [] and not any(s.startswith("waiting for jobs") for s in context.said)


def test_up_without_workers_to_drain_changes_nothing(deployed: Any) -> None:
    cluster = Cluster({})
    for worker in ("w0", "w1", "w2"):
        del cluster.nodes[worker]
    deployed(cluster)
    context = Context()
    result = up._up_cluster(context, _op(), _block())  # type: ignore[arg-type]
    assert result.failed and context.updates == []
    assert result.error is not None and "no Slurm worker was found" in result.error


def test_up_on_soperator_waits_for_the_selectors_pods_too(deployed: Any) -> None:
    cluster = Cluster({})  # no Slurm job: every worker drains at once
    cluster.pods.append(
        {
            "metadata": {"name": "train-0", "namespace": "team", "labels": {"app": "train"}},
            "status": {"phase": "Running"},
        }
    )
    deployed(cluster)
    context = Context()
    result = up._up_cluster(context, _op(), _block(selectors=["app=train"]))  # type: ignore[arg-type]
    assert result.failed and context.updates == [] and result.error is not None
    assert "job pod(s) still running after waiting 1s before a disruptive change" in result.error
    assert ": team/train-0; the cluster is not changed" in result.error and "DRAIN" not in result.error
    assert "the Slurm drains it asked for are lifted (3 of 3 node(s))" in result.error
    assert (
        "waiting for jobs: app=train; Slurm jobs on every worker (drained first) (up to 1s)" in context.said
    )


def test_up_on_mk8s_waits_for_the_pods_only_and_says_so_as_before(deployed: Any) -> None:
    cluster = Cluster({"w1": 1})  # Slurm-labelled nodes on an mk8s cluster are nobody's workers here
    cluster.pods.append(
        {
            "metadata": {"name": "train-0", "namespace": "team", "labels": {"app": "train"}},
            "status": {"phase": "Running"},
        }
    )
    deployed(cluster)
    context = Context(backend="mk8s")
    result = up._up_cluster(context, _op(), _block(selectors=["app=train"]))  # type: ignore[arg-type]
    assert result.failed and context.updates == [] and cluster.applied == []
    assert result.error == (
        "job pod(s) still running after waiting 1s before a disruptive change "
        "(module.k8s.nebius_mk8s_v1_node_group.worker[0]): team/train-0; the cluster is not changed, "
        "nothing was evicted (`up --force` applies it without waiting)"
    )
    assert "waiting for jobs: app=train (up to 1s)" in context.said
