"""The ladder's actions (engine/health/actions.py) against a stand-in for a cluster's API: the same node
object or nothing, GPU workloads read again right before, cordon with the node's resourceVersion as the
precondition, requalification through the path given, receipts 0600, and the prior scheduling restored on
the node's validated return."""

from __future__ import annotations

import copy
import json
import stat
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.cloud.errors import CloudRequest, FailedPrecondition
from npa_pulumi.cloud.port import NodeRepair
from npa_pulumi.engine.backends.soperator import SLURM
from npa_pulumi.engine.health import actions
from npa_pulumi.engine.health import remediation as core
from npa_pulumi.kube.client import KubeClient, KubeError
from npa_pulumi.spec import parse_spec
from npa_pulumi.spec.constants import FaultReason, Rung
from npa_pulumi.spec.remediation import FleetRemediation, resolve

JSON = dict[str, Any]
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
KEY = "research/train"
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: fleet
projects:
  - name: research
    clusters:
      - name: train
        gpu_nodes: {count: 4, preset: 1gpu-16vcpu-200gb, platform: gpu-l40s-a}
"""


class FakeApi:
    """Nodes and pods as the API server keeps them; a merge patch with a stale resourceVersion is refused
    (409), as the API server refuses it."""

    def __init__(self, *names: str) -> None:
        self.nodes: dict[str, JSON] = {
            n: {"metadata": {"name": n, "uid": f"uid-{n}", "resourceVersion": "1"}, "spec": {}} for n in names
        }
        self.pods: list[JSON] = []
        self.patches: list[tuple[str, JSON]] = []
        self.applied: list[tuple[str, JSON]] = []
        self.racing = False  # someone else patches a node right after each read of it

    def get_or_none(self, path: str) -> JSON | None:
        found = self.nodes.get(path.rsplit("/", 1)[1])
        read = copy.deepcopy(found) if found is not None else None
        if found is not None and self.racing:
            found["metadata"]["resourceVersion"] = "7"
        return read

    def get(self, path: str) -> JSON:
        assert path.startswith("/api/v1/pods?fieldSelector=spec.nodeName%3D"), path
        node = path.rsplit("%3D", 1)[1]
        return {"items": [p for p in self.pods if p["spec"]["nodeName"] == node]}

    def apply(self, path: str, obj: JSON, field_manager: str) -> JSON:
        """Server-side apply of a node's status: its conditions merged by type."""
        assert path.endswith("/status") and field_manager == actions.FIELD_MANAGER, path
        node = self.nodes[path.split("/")[-2]]
        kept = [
            c
            for c in node.setdefault("status", {}).get("conditions", [])
            if c["type"] not in {c["type"] for c in obj["status"]["conditions"]}
        ]
        node["status"]["conditions"] = kept + obj["status"]["conditions"]
        self.applied.append((path, obj))
        return node

    def merge_patch(self, path: str, patch: JSON) -> JSON:
        node = self.nodes[path.rsplit("/", 1)[1]]
        if patch["metadata"]["resourceVersion"] != node["metadata"]["resourceVersion"]:
            raise KubeError(f"PATCH {path}: 409 the object has been modified", 409, "Conflict")
        node["spec"]["unschedulable"] = patch["spec"]["unschedulable"]
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        self.patches.append((path, patch))
        return node


def gpu_pod(node: str) -> JSON:
    return {
        "metadata": {"namespace": "team", "name": "train-0"},
        "spec": {"nodeName": node, "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running"},
    }


class FakeCloud:
    """The cloud port's two repair calls, recorded; `fail`: the cloud refuses them."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail = fail

    def recover(self, node: str) -> NodeRepair:
        return self._call("recover", node, "RECOVERED", "RUNNING")

    def remove(self, node: str) -> NodeRepair:
        return self._call("remove", node, "DELETED", "DELETED")

    def _call(self, verb: str, node: str, action: str, state: str) -> NodeRepair:
        self.calls.append((verb, node))
        if self.fail:
            raise FailedPrecondition(f"instance {node} is STOPPING", CloudRequest("compute.v1.Stop", {}))
        return NodeRepair(instance_id=f"i-{node}", instance_name=node, action=action, state=state)


def access(
    api: FakeApi,
    probed: list[str] | None = None,
    passed: bool = True,
    cloud: FakeCloud | None = None,
    manager: core.WorkloadManager | None = None,
) -> dict[str, actions.ClusterAccess]:
    def requalify(node: JSON) -> JSON:
        (probed if probed is not None else []).append(node["metadata"]["name"])
        return {"passed": passed, "errors": [] if passed else ["smoke failed"]}

    client: Any = api

    def client_for(_timeout: float) -> KubeClient:
        found: KubeClient = client
        return found

    recover = None if cloud is None else cloud.recover
    remove = None if cloud is None else cloud.remove
    return {
        KEY: actions.ClusterAccess("fleet-research-train", client_for, requalify, recover, remove, manager)
    }


def policy() -> FleetRemediation:
    return resolve(parse_spec(SPEC))


def decision(node: str, rung: Rung) -> core.Decision:
    return core.Decision(KEY, node, FaultReason.GPU_ERROR, core.Status.ACT, rung)


def incident(node: str, *attempts: core.Attempt) -> core.Incident:
    return core.Incident(KEY, node, f"uid-{node}", FaultReason.GPU_ERROR, T0, attempts=attempts)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path))
    return tmp_path


def test_cordon_uses_the_nodes_resource_version_and_leaves_a_private_receipt() -> None:
    api = FakeApi("n1")
    ledger, done = actions.execute(
        "fleet", [decision("n1", Rung.CORDON_AND_REPORT)], [incident("n1")], access(api), policy(), T0
    )
    [action] = done
    assert (action["outcome"], action["detail"]) == ("done", "cordoned")
    assert api.patches == [
        ("/api/v1/nodes/n1", {"metadata": {"resourceVersion": "1"}, "spec": {"unschedulable": True}})
    ]
    [attempt] = ledger[0].attempts
    assert (attempt.rung, attempt.outcome, attempt.note) == (
        Rung.CORDON_AND_REPORT,
        core.Outcome.PENDING,
        actions.CORDONED_BY_LADDER,
    )
    receipt = Path(action["receipt"])
    assert (
        stat.S_IMODE(receipt.stat().st_mode) == 0o600 and stat.S_IMODE(receipt.parent.stat().st_mode) == 0o700
    )
    kept = json.loads(receipt.read_text())
    assert (kept["node"], kept["uid"], kept["rung"], kept["prior_unschedulable"]) == (
        "n1",
        "uid-n1",
        "cordon-and-report",
        False,
    )


def test_nothing_is_done_to_a_replaced_node_nor_one_whose_gpus_a_workload_took_since_the_read() -> None:
    api = FakeApi("n1", "n2")
    api.nodes["n1"]["metadata"]["uid"] = "uid-new"  # replaced under the same name
    api.pods.append(gpu_pod("n2"))
    wanted = [decision("n1", Rung.CORDON_AND_REPORT), decision("n2", Rung.CORDON_AND_REPORT)]
    ledger, done = actions.execute(
        "fleet", wanted, [incident("n1"), incident("n2")], access(api), policy(), T0
    )
    assert [(a["node"], a["outcome"]) for a in done] == [("n1", "skipped"), ("n2", "skipped")]
    assert "replaced" in done[0]["detail"] and "team/train-0" in done[1]["detail"]
    assert api.patches == [] and all(not i.attempts for i in ledger)


def test_a_node_changed_between_the_read_and_the_cordon_is_left_alone() -> None:
    api = FakeApi("n1")
    api.racing = True
    ledger, done = actions.execute(
        "fleet", [decision("n1", Rung.CORDON_AND_REPORT)], [incident("n1")], access(api), policy(), T0
    )
    assert done[0]["outcome"] == "failed" and "409" in done[0]["detail"]
    assert not ledger[0].attempts and "unschedulable" not in api.nodes["n1"]["spec"]


def test_requalify_goes_through_the_requalification_path_and_stays_pending_until_the_next_read() -> None:
    api, probed = FakeApi("n1"), list[str]()
    ledger, done = actions.execute(
        "fleet",
        [decision("n1", Rung.REQUALIFY)],
        [incident("n1")],
        access(api, probed, passed=False),
        policy(),
        T0,
    )
    assert probed == ["n1"] and done[0]["detail"] == "the gate's probes failed: smoke failed"
    assert [(a.rung, a.outcome) for a in ledger[0].attempts] == [(Rung.REQUALIFY, core.Outcome.PENDING)]


def test_on_its_validated_return_a_node_the_ladder_cordoned_is_schedulable_again() -> None:
    api = FakeApi("n1", "n2", "n3")
    for name in ("n1", "n2", "n3"):
        api.nodes[name]["spec"]["unschedulable"] = True
    cordoned = core.Attempt(Rung.CORDON_AND_REPORT, T0, core.Outcome.CLEARED, actions.CORDONED_BY_LADDER)
    was_cordoned = core.Attempt(Rung.CORDON_AND_REPORT, T0, core.Outcome.CLEARED, "")  # cordoned before us
    flagged = core.Attempt(Rung.FLAG_HARDWARE, T0, core.Outcome.PENDING, actions.CORDONED_BY_LADDER)
    before = [incident("n1", cordoned), incident("n2", was_cordoned), incident("n3", cordoned, flagged)]
    at = T0 + timedelta(minutes=9)
    after = [
        core.Incident(i.cluster, i.node, i.uid, i.reason, i.opened_at, at, core.Closed.RETURNED, i.attempts)
        for i in before
    ]
    done = actions.restore("fleet", before, after, access(api), at)
    assert [(a["node"], a["rung"], a["outcome"]) for a in done] == [("n1", "restore-scheduling", "done")]
    assert api.nodes["n1"]["spec"]["unschedulable"] is None
    assert (
        api.nodes["n2"]["spec"]["unschedulable"] is True and api.nodes["n3"]["spec"]["unschedulable"] is True
    )
    # an incident closed in an earlier read is not restored again
    assert actions.restore("fleet", after, after, access(api), at) == []


def test_cloud_recovery_cordons_a_schedulable_node_first_then_asks_the_cloud() -> None:
    api, cloud = FakeApi("n1", "n2"), FakeCloud()
    api.nodes["n2"]["spec"]["unschedulable"] = True  # cordoned by someone else before
    wanted = [decision("n1", Rung.CLOUD_RECOVERY), decision("n2", Rung.CLOUD_RECOVERY)]
    ledger, done = actions.execute(
        "fleet", wanted, [incident("n1"), incident("n2")], access(api, cloud=cloud), policy(), T0
    )
    assert cloud.calls == [("recover", "n1"), ("recover", "n2")]
    assert [a["outcome"] for a in done] == ["done", "done"]
    assert "stopped and started again" in done[0]["detail"]
    assert api.nodes["n1"]["spec"]["unschedulable"] is True
    [patch] = api.patches  # n2 was cordoned already: no patch, and restore will leave it cordoned
    assert patch[0] == "/api/v1/nodes/n1"
    first, second = (i.attempts[-1] for i in ledger)
    assert (first.rung, first.outcome, first.note) == (
        Rung.CLOUD_RECOVERY,
        core.Outcome.PENDING,
        actions.CORDONED_BY_LADDER,
    )
    assert second.note == ""


def test_remove_from_group_asks_the_cloud_to_delete_the_nodes_instance() -> None:
    api, cloud = FakeApi("n1"), FakeCloud()
    ledger, done = actions.execute(
        "fleet",
        [decision("n1", Rung.REMOVE_FROM_GROUP)],
        [incident("n1")],
        access(api, cloud=cloud),
        policy(),
        T0,
    )
    assert cloud.calls == [("remove", "n1")] and "its group replaces it" in done[0]["detail"]
    assert ledger[0].attempts[-1].rung is Rung.REMOVE_FROM_GROUP


def test_a_cloud_rung_is_not_taken_on_a_node_whose_gpus_a_workload_holds_nor_without_the_cloud() -> None:
    api, cloud = FakeApi("n1", "n2"), FakeCloud()
    api.pods.append(gpu_pod("n1"))
    wanted = [decision("n1", Rung.REMOVE_FROM_GROUP)]
    _, done = actions.execute("fleet", wanted, [incident("n1")], access(api, cloud=cloud), policy(), T0)
    assert done[0]["outcome"] == "skipped" and cloud.calls == [] and api.patches == []
    wanted = [decision("n2", Rung.CLOUD_RECOVERY)]
    ledger, done = actions.execute("fleet", wanted, [incident("n2")], access(api), policy(), T0)
    assert done[0]["outcome"] == "skipped" and "not offered" in done[0]["detail"]
    assert not ledger[0].attempts


def test_a_cloud_that_refuses_the_call_leaves_the_rung_untaken() -> None:
    api, cloud = FakeApi("n1"), FakeCloud(fail=True)
    ledger, done = actions.execute(
        "fleet",
        [decision("n1", Rung.CLOUD_RECOVERY)],
        [incident("n1")],
        access(api, cloud=cloud),
        policy(),
        T0,
    )
    assert done[0]["outcome"] == "failed" and done[0]["detail"].startswith("the cloud:")
    assert not ledger[0].attempts


def _drain_reason(api: FakeApi, node: str) -> tuple[str, str, str] | None:
    found = [
        c for c in api.nodes[node].get("status", {}).get("conditions", []) if c["type"] == "SlurmNodeDrain"
    ]
    return (found[0]["status"], found[0]["reason"], found[0]["message"]) if found else None


def test_on_soperator_the_node_is_drained_through_slurm_first_and_the_rung_waits_for_drained() -> None:
    api, probed = FakeApi("w1"), list[str]()
    api.pods.append(gpu_pod("w1"))  # its slurmd worker holds its GPUs: Slurm's state decides, not the pod
    drain = core.Decision(
        KEY, "w1", FaultReason.GPU_ERROR, core.Status.ACT, Rung.REQUALIFY, drain="npa-remediation gpu-error"
    )
    ledger, done = actions.execute(
        "fleet", [drain], [incident("w1")], access(api, probed, manager=SLURM), policy(), T0
    )
    assert (done[0]["rung"], done[0]["outcome"]) == (actions.DRAIN, "done")
    assert _drain_reason(api, "w1") == ("True", "NodeNeedDrain", "npa-remediation gpu-error")
    assert not ledger[0].attempts and probed == [] and api.patches == []  # no rung taken, not cordoned
    # the rung, decided once the read saw it drained, is re-read first: still draining, nothing is done
    api.nodes["w1"]["status"]["conditions"][0]["reason"] = "NodeDraining"
    rung = decision("w1", Rung.REQUALIFY)
    ledger, done = actions.execute("fleet", [rung], ledger, access(api, probed, manager=SLURM), policy(), T0)
    assert done[0]["outcome"] == "skipped" and "Slurm DRAIN+ALLOC now" in done[0]["detail"] and probed == []
    api.nodes["w1"]["status"]["conditions"][0]["reason"] = "NodeDrained"
    ledger, done = actions.execute("fleet", [rung], ledger, access(api, probed, manager=SLURM), policy(), T0)
    assert done[0]["outcome"] == "done" and probed == ["w1"]
    # its validated return releases the ladder's drain
    at = T0 + timedelta(minutes=9)
    closed = [replace(ledger[0], closed_at=at, closed=core.Closed.RETURNED)]
    [restored] = actions.restore("fleet", ledger, closed, access(api, manager=SLURM), at)
    assert restored["outcome"] == "done"
    assert _drain_reason(api, "w1") == ("False", "NodeUndrained", "npa-remediation gpu-error")


def test_a_drain_someone_else_asked_for_is_not_released() -> None:
    api = FakeApi("w1")
    api.nodes["w1"]["status"] = {
        "conditions": [
            {"type": "SlurmNodeDrain", "status": "True", "reason": "NodeDrained", "message": "maint"}
        ]
    }
    before = [incident("w1")]
    at = T0 + timedelta(minutes=9)
    closed = [replace(before[0], closed_at=at, closed=core.Closed.RETURNED)]
    assert actions.restore("fleet", before, closed, access(api, manager=SLURM), at) == []
    assert _drain_reason(api, "w1") == ("True", "NodeDrained", "maint") and api.applied == []
