"""`health`'s judgement (engine/health/model.py): Nebius' conditions, cordon and taints, GPUs against the
preset, maintenance events and qualification decide each node's bucket; the totals and --min-usable."""

from __future__ import annotations

from typing import Any

import pytest

from npa_pulumi.cloud.port import MaintenanceEvent
from npa_pulumi.engine.health.model import Qualification, below_min_usable, judge_node, totals
from npa_pulumi.kube.gpu_health.config import GateConfig
from npa_pulumi.sdk.requests import HealthRequest

CONFIG = GateConfig(
    expected_nodes=4,
    expected_gpu_nodes=3,
    gpus_per_node=8,
    gpu_platform="gpu-h100-sxm",
    driver_mode="managed-image",
    nvswitch=False,
    stabilization_s=0,
    timeout_s=60,
    cuda_smoke=True,
    smoke_image="cuda",
)


def node(name: str, *, gpus: int = 8, ready: bool = True, uid: str = "", **extra: Any) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}]
    conditions += extra.pop("conditions", [])
    labels = {"node.kubernetes.io/instance-type": "gpu-h100-sxm" if gpus else "cpu-d3"}
    labels["nebius.com/node-group-name"] = "gpu" if gpus else "cpu"
    resources = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {
        "metadata": {"name": name, "uid": uid or f"uid-{name}", "labels": labels},
        "spec": {
            "taints": extra.pop(
                "taints", [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
            ),
            "providerID": f"nebius://{name}",
            **extra,
        },
        "status": {
            "conditions": conditions,
            "allocatable": resources,
            "capacity": resources,
            "nodeInfo": {"bootID": f"boot-{name}"},
        },
    }


GATE = Qualification(gate_passed=True, gate_nodes=frozenset({"cpu-0", "gpu-0", "gpu-1", "gpu-2"}))


def test_a_healthy_gated_gpu_node_is_usable_and_a_cpu_node_is_not_counted() -> None:
    gpu = judge_node(node("gpu-0"), CONFIG, GATE, [])
    assert (gpu.state, gpu.qualification, gpu.gpus_allocatable, gpu.problems) == ("usable", "gate", 8, [])
    assert gpu.node_group == "gpu" and gpu.taints == ["nvidia.com/gpu=true:NoSchedule"]
    cpu = judge_node(node("cpu-0", gpus=0, taints=[]), CONFIG, GATE, [])
    assert (cpu.state, cpu.gpu) == ("cpu", False)


def test_nebius_conditions_degrade_or_put_a_node_under_maintenance_with_their_messages() -> None:
    error = {"type": "NebiusGPUError", "status": "True", "reason": "GPUFailure", "message": "Xid 79"}
    cleared = {"type": "NebiusGPUError", "status": "False", "reason": "GPUHealthy", "message": "ok"}
    disk = {"type": "NebiusBootDiskIOError", "status": "True", "reason": "BootDiskIOError", "message": "io"}
    scheduled = {"type": "NebiusMaintenanceScheduled", "status": "True", "reason": "M", "message": "soon"}
    assert judge_node(node("gpu-0", conditions=[error]), CONFIG, GATE, []).state == "degraded"
    assert judge_node(node("gpu-0", conditions=[cleared]), CONFIG, GATE, []).state == "usable"
    found = judge_node(node("gpu-0", conditions=[disk]), CONFIG, GATE, [])
    assert found.state == "degraded" and "NebiusBootDiskIOError: io" in found.problems
    found = judge_node(node("gpu-1", conditions=[scheduled]), CONFIG, GATE, [])
    assert (found.state, [c.type for c in found.conditions]) == (
        "maintenance",
        ["NebiusMaintenanceScheduled"],
    )


def test_a_maintenance_event_is_matched_to_its_node_by_instance() -> None:
    event = MaintenanceEvent(id="ev-1", project_id="p", instance_id="gpu-2", reason="HW_GPU_XID_79")
    other = MaintenanceEvent(id="ev-2", project_id="p", instance_name="elsewhere", reason="HW_IB_LINK_DOWN")
    found = judge_node(node("gpu-2"), CONFIG, GATE, [event, other])
    assert found.state == "maintenance"
    assert [(m.id, m.reason) for m in found.maintenance] == [("ev-1", "HW_GPU_XID_79")]


def test_not_ready_cordoned_tainted_and_short_nodes_are_degraded() -> None:
    assert judge_node(node("gpu-0", ready=False), CONFIG, GATE, []).state == "degraded"
    cordoned = judge_node(node("gpu-0", unschedulable=True), CONFIG, GATE, [])
    assert (cordoned.state, cordoned.cordoned) == ("degraded", True)
    taint = {"key": "nvidia.com/gpu", "value": "mig-not-ready", "effect": "NoSchedule"}
    assert judge_node(node("gpu-0", taints=[taint]), CONFIG, GATE, []).state == "degraded"
    short = judge_node(node("gpu-0", gpus=7), CONFIG, GATE, [])
    assert (short.state, short.gpus_allocatable) == ("usable", 7)  # its 7 usable, the 8th degraded
    assert totals([short], CONFIG).degraded == 1


def test_a_node_that_joined_after_the_last_gate_pass_is_unqualified_until_requalified() -> None:
    new = node("gpu-0-r1", uid="u-new")
    assert judge_node(new, CONFIG, GATE, []).state == "unqualified"
    passed = Qualification(
        gate_passed=True,
        gate_nodes=GATE.gate_nodes,
        requalified={"gpu-0-r1": {"uid": "u-new", "passed": True}},
    )
    assert judge_node(new, CONFIG, passed, []).qualification == "requalified"
    assert judge_node(node("gpu-0-r1", uid="u-later"), CONFIG, passed, []).state == "unqualified"
    failed = Qualification(
        gate_passed=True,
        gate_nodes=GATE.gate_nodes,
        requalified={"gpu-0-r1": {"uid": "u-new", "passed": False, "errors": ["CUDA smoke Failed"]}},
    )
    judged = judge_node(new, CONFIG, failed, [])
    assert judged.state == "unqualified" and "failed requalification: CUDA smoke Failed" in judged.problems


def test_qualification_from_the_stacks_outputs() -> None:
    passed = {"validation": "gpu-health", "health_evidence": {"passed": True, "nodes": {"gpu-0": {}}}}
    assert Qualification.from_outputs(passed, None).of(node("gpu-0"))[0] == "gate"
    assert Qualification.from_outputs(passed, None).of(node("gpu-9"))[0] == "unqualified"
    failed = {"health_evidence": {"passed": False, "nodes": {"gpu-0": {}}}}
    assert Qualification.from_outputs(failed, None).of(node("gpu-0"))[0] == "unqualified"
    assert Qualification.from_outputs({"validation": "skipped"}, None).of(node("gpu-0"))[0] == "not-gated"


def test_totals_and_min_usable() -> None:
    error = {"type": "NebiusGPUError", "status": "True", "message": "Xid 79"}
    nodes = [
        judge_node(node("gpu-0", conditions=[error]), CONFIG, GATE, []),
        judge_node(node("gpu-1"), CONFIG, GATE, []),
    ]  # gpu-2 never registered
    found = totals(nodes, CONFIG)
    assert (found.requested, found.usable, found.degraded, found.missing) == (24, 8, 8, 8)
    assert below_min_usable(found, 1.0) and below_min_usable(found, 0.5)
    assert not below_min_usable(found, 1 / 3) and not below_min_usable(found, 0.0)
    assert not below_min_usable(
        totals([], CONFIG.__class__(**{**CONFIG.__dict__, "expected_gpu_nodes": 0})), 1.0
    )


@pytest.mark.parametrize("bad", [-0.1, 1.5])
def test_min_usable_must_be_a_fraction(bad: float) -> None:
    from npa_pulumi.errors import UserInputError

    with pytest.raises(UserInputError, match="fraction"):
        HealthRequest(min_usable=bad)


# ------------------------------------------------------------------- what a staged rollout decides


def _cluster(*nodes: Any, status: str = "ok", events: Any = ()) -> Any:
    from npa_pulumi.output.health import ClusterHealth

    judged = [judge_node(n, CONFIG, GATE, list(events)) for n in nodes]
    return ClusterHealth(
        stack="f.p.c",
        project_key="p",
        cluster_name="c",
        kube_context="ctx",
        status=status,
        nodes=judged,
        totals=totals(judged, CONFIG),
    )


def _gpu_error() -> dict[str, Any]:
    return {"type": "NebiusGPUError", "status": "True", "message": "XID 79 on GPU 3"}


def test_a_rollout_holds_a_cluster_under_maintenance_or_with_a_gpu_error_node() -> None:
    from npa_pulumi.engine.health.model import hold_reason

    healthy = [node("cpu-0", gpus=0, taints=[]), node("gpu-0"), node("gpu-1"), node("gpu-2")]
    assert hold_reason(_cluster(*healthy)) is None
    event = MaintenanceEvent(id="ev-1", project_id="p", instance_id="gpu-2", reason="HW_IB_LINK_DOWN")
    reason = hold_reason(_cluster(*healthy, events=[event]))
    assert reason == "maintenance HW_IB_LINK_DOWN on node gpu-2 (ev-1)"
    broken = [healthy[0], node("gpu-0", conditions=[_gpu_error()]), *healthy[2:]]
    assert hold_reason(_cluster(*broken)) == "node gpu-0: NebiusGPUError (XID 79 on GPU 3)"
    scheduled = {"type": "NebiusMaintenanceScheduled", "status": "True", "reason": "Planned"}
    assert "NebiusMaintenanceScheduled" in (
        hold_reason(_cluster(node("gpu-0", conditions=[scheduled]))) or ""
    )
    # A cordoned or NotReady node is the gate's to judge, not a reason to hold; nor is an unread cluster.
    assert hold_reason(_cluster(node("gpu-0", ready=False), node("gpu-1", unschedulable=True))) is None
    assert hold_reason(_cluster(status="failed")) is None
    many = [node(f"gpu-{i}", conditions=[_gpu_error()]) for i in range(5)]
    assert (hold_reason(_cluster(*many)) or "").endswith("; and 2 more")


def test_a_soak_is_clean_only_with_every_node_usable_and_none_missing() -> None:
    from npa_pulumi.engine.health.model import soak_problem

    healthy = [node("cpu-0", gpus=0, taints=[]), node("gpu-0"), node("gpu-1"), node("gpu-2")]
    assert soak_problem(_cluster(*healthy)) is None
    cordoned = soak_problem(_cluster(healthy[0], node("gpu-0", unschedulable=True), *healthy[2:]))
    assert cordoned is not None and "node gpu-0 degraded: cordoned" in cordoned
    cpu_down = soak_problem(_cluster(node("cpu-0", gpus=0, taints=[], ready=False), *healthy[1:]))
    assert cpu_down is not None and "node cpu-0" in cpu_down
    missing = soak_problem(_cluster(*healthy[:3]))  # gpu-2 gone
    assert missing is not None and "8 GPU(s) on nodes that are not registered" in missing
    newcomer = soak_problem(_cluster(*healthy[:3], node("gpu-9")))  # replaced since the gate
    assert newcomer is not None and "gpu-9 unqualified" in newcomer
    unread = _cluster(status="failed")
    unread.error = "the cluster's API could not be read: timeout"
    assert soak_problem(unread) == "health not read: the cluster's API could not be read: timeout"


def test_a_soak_under_ignore_maintenance_counts_only_what_is_beside_the_maintenance() -> None:
    from npa_pulumi.engine.health.model import soak_problem

    healthy = [node("cpu-0", gpus=0, taints=[]), node("gpu-0"), node("gpu-1"), node("gpu-2")]
    on_cpu = MaintenanceEvent(id="ev-1", project_id="p", instance_id="cpu-0", reason="HW_GPU_XID_48")
    on_gpu = MaintenanceEvent(id="ev-2", project_id="p", instance_id="gpu-1", reason="HW_IB_LINK_DOWN")
    serviced = _cluster(*healthy, events=[on_cpu, on_gpu])
    plain = soak_problem(serviced)
    assert plain is not None and "node cpu-0 cpu: maintenance HW_GPU_XID_48" in plain
    assert "node gpu-1 maintenance: maintenance HW_IB_LINK_DOWN" in plain
    assert soak_problem(serviced, ignore_maintenance=True) is None  # taken knowing of it
    # Anything beside the maintenance still counts: a GPU short on the node under maintenance, a cordon.
    short = node("gpu-1")
    short["status"]["allocatable"] = {"nvidia.com/gpu": "7"}
    worse = soak_problem(_cluster(healthy[0], healthy[1], short, healthy[3], events=[on_gpu]), True)
    assert worse is not None and "gpu-1 maintenance: 7 of 8 GPUs allocatable" in worse
    cordoned = soak_problem(_cluster(node("gpu-0", unschedulable=True), events=[on_cpu]), True)
    assert cordoned is not None and "gpu-0 degraded: cordoned" in cordoned


# ------------------------------------------------------------- requalification's fabric re-run


def _passed(name: str) -> dict[str, Any]:
    return {"uid": f"uid-{name}", "passed": True, "errors": [], "probes": {}}


def test_the_fabric_check_qualifies_the_nodes_it_clears_and_fails_the_ones_it_names() -> None:
    from npa_pulumi.engine.health.requalification import judge_fabric

    ok = {"status": "passed", "passed": True, "reason": "fabric bandwidth at or above the thresholds"}
    entries = {"gpu-3-r1": _passed("gpu-3-r1")}
    summary = judge_fabric(entries, ok)
    assert entries["gpu-3-r1"]["passed"] is True and entries["gpu-3-r1"]["probes"]["fabric"] == summary
    assert summary["status"] == "passed" and summary["slow_nodes"] == []

    slow_link = {
        "status": "failed",
        "passed": False,
        "reason": "inter-node NCCL bandwidth 180 GB/s below 360 GB/s; slow: gpu-3-r1",
        "slow_nodes": ["gpu-3-r1"],
        "inter_node": {"culprits": ["gpu-3-r1"], "rounds": 3},
    }
    entries = {"gpu-3-r1": _passed("gpu-3-r1"), "gpu-5-r1": _passed("gpu-5-r1")}
    summary = judge_fabric(entries, slow_link)
    assert entries["gpu-3-r1"]["passed"] is False and "fabric check" in entries["gpu-3-r1"]["errors"][0]
    assert entries["gpu-5-r1"]["passed"] is True  # cleared: another node is slow
    assert summary["rounds"] == 3 and summary["slow_nodes"] == ["gpu-3-r1"]

    link = {**slow_link, "slow_nodes": [], "inter_node": {"culprits": ["gpu-1 <-> gpu-3-r1"]}}
    entries = {"gpu-3-r1": _passed("gpu-3-r1")}
    judge_fabric(entries, link)
    assert entries["gpu-3-r1"]["passed"] is False  # one end of the slow link

    refused = {"status": "failed", "passed": False, "reason": "refused: pods hold the GPUs: ml/train-0"}
    failed_probe = {"uid": "u", "passed": False, "errors": ["gpu-4-r1: not Ready"]}
    entries = {"gpu-3-r1": _passed("gpu-3-r1"), "gpu-4-r1": failed_probe}
    judge_fabric(entries, refused)
    assert entries["gpu-3-r1"]["passed"] is False and "refused" in entries["gpu-3-r1"]["errors"][0]
    assert entries["gpu-4-r1"]["errors"] == ["gpu-4-r1: not Ready"] and "probes" not in entries["gpu-4-r1"]
