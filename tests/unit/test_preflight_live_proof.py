"""The live proof behind zero incremental demand (preflight/live_proof.py), group by group: the requested
template, workers, preemptibility and the exact STRICT binding; a PROVISIONING-again group with the same
proof counts, one waiting on quota does not."""

from __future__ import annotations

from typing import Any

from npa_pulumi.cloud.port import NodeGroup, NodeGroupCondition
from npa_pulumi.plan import resolve_targets
from npa_pulumi.preflight.live_proof import ExpectedGroup, expected_groups, group_mismatches
from npa_pulumi.spec import parse_spec

BLOCK = "capacityblockgroup-e00reserved0000a1b2"
SPEC = f"""\
apiVersion: npa.fleet/v0.0.1
name: proof
region: us-central1
projects:
  - project_id: project-e00one
    clusters:
      - name: reserved
        cpu_nodes: {{count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
        gpu_nodes:
          {{count: 2, platform: gpu-rtx6000, preset: 2gpu-48vcpu-436gb, capacity_block_group: {BLOCK}}}
        enable_filestore: false
"""


def _groups() -> tuple[list[NodeGroup], list[ExpectedGroup]]:
    [target] = resolve_targets(parse_spec(SPEC))
    wanted = expected_groups(target)
    assert [(w.kind, w.count) for w in wanted] == [("cpu", 1), ("gpu", 1), ("gpu", 1)]  # split reserved pool
    gpu = wanted[1]
    live = NodeGroup(
        id="mk8snodegroup-e00gpu0",
        cluster_id="mk8scluster-e00one",
        name="reserved-ng-gpu-0",
        state="RUNNING",
        target_node_count=1,
        ready_node_count=1,
        platform=gpu.platform,
        preset=gpu.preset,
        preemptible=False,
        reservation_policy="STRICT",
        reservation_ids=(BLOCK,),
        disk_size_gib=gpu.disk_gib,
    )
    return [live], [gpu]


def test_the_exact_group_is_proven_and_each_change_is_named() -> None:
    [live], [gpu] = _groups()
    assert group_mismatches(live, gpu) == []
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "preset": ({"preset": "1gpu-24vcpu-218gb"}, "preset 1gpu-24vcpu-218gb, 2gpu-48vcpu-436gb requested"),
        "preemptible": ({"preemptible": True}, "a reserved pool must not be preemptible"),
        "auto": ({"reservation_policy": "AUTO"}, "bound to AUTO [capacityblockgroup-…a1b2], STRICT"),
        "block": (
            {"reservation_ids": ("capacityblockgroup-e00other0000ffff",)},
            "bound to STRICT [capacityblockgroup-…ffff]",
        ),
        "unbound": ({"reservation_policy": "", "reservation_ids": ()}, "bound to no reservation"),
        "disk": ({"disk_size_gib": 64}, "boot disk 64 GiB"),
        "count": ({"target_node_count": 2, "ready_node_count": 2}, "target 2 worker(s), 1 requested"),
        "workers": ({"ready_node_count": 0}, "0 of 1 worker(s) running"),
    }
    for name, (change, message) in cases.items():
        problems = group_mismatches(live.model_copy(update=change), gpu)
        assert any(message in p for p in problems), (name, problems)
        assert all(BLOCK not in p for p in problems)  # the block id is masked


def test_provisioning_again_counts_only_with_the_same_proof() -> None:
    [live], [gpu] = _groups()
    again = live.model_copy(update={"state": "PROVISIONING"})
    assert group_mismatches(again, gpu) == []
    starved = again.model_copy(
        update={"conditions": (NodeGroupCondition(kind="QuotaFailure", message="x", quota="compute.gpu"),)}
    )
    assert any("waiting on quota" in p for p in group_mismatches(starved, gpu))
    changed = again.model_copy(update={"preset": "1gpu-24vcpu-218gb"})
    assert group_mismatches(changed, gpu)
    assert group_mismatches(live.model_copy(update={"state": "ERROR"}), gpu)
