"""A staged rollout never asks one capacity block group for more than `max_in_flight_per_reservation`
clusters at once: six clusters on one block group, limit 2, and the simulator's own records (each node
group's PROVISIONING interval, from its created and ready times, and the block group it allocates from)
never overlap more than two. No Kubernetes API: the limit is the scheduler's, not the gate's."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from fleet_helpers import by_stack, npa, write_spec

from npa_pulumi.simulator.db import db_path

pytestmark = pytest.mark.integration

BLOCK = "capacityblockgroup-local1"  # the local tenant's RTX PRO 6000 block group: 8 GPUs in us-central1
SPEC = f"""\
apiVersion: npa.fleet/v0.0.1
name: lim
region: us-central1
project_prefix: "lim-"
defaults:
  cpu_nodes: {{count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
  gpu_nodes: {{count: 1, platform: gpu-rtx6000, preset: 1gpu-24vcpu-218gb, capacity_block_group: {BLOCK}}}
  enable_filestore: false
  enable_gpu_cluster: false
projects:
  - name: p
    clusters: [{{name: c1}}, {{name: c2}}, {{name: c3}}, {{name: c4}}, {{name: c5}}, {{name: c6}}]
rollout:
  waves: [{{rest: true}}]
  max_in_flight: 6
  max_in_flight_per_reservation: 2
"""


def _provisioning_intervals(block: str) -> list[tuple[float, float]]:
    """[created, ready) of every node group allocating from `block`, as the simulator stored them."""
    path = db_path(Path(os.environ["NPA_LOCAL_CLOUD_DIR"]))
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT r.created_at, r.ready_at FROM resources r JOIN allocations a ON a.owner_id = r.id "
            "WHERE r.kind = 'node_group' AND a.target = ?",
            (f"capacityblock:{block}",),
        ).fetchall()
    return [(float(created), float(ready)) for created, ready in rows]


def _most_at_once(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = current = 0
    for _, step in events:  # an end sorts before a start at the same instant
        current += step
        most = max(most, current)
    return most


def test_at_most_two_node_groups_of_one_block_group_provision_at_once(
    isolated_home: Path, tmp_path: Path
) -> None:
    npa("local-cloud", "init", check=True)
    npa("local-cloud", "set", "provisioning-seconds", "4", check=True)
    spec = str(write_spec(tmp_path / "fleet.yaml", SPEC))
    planned = npa("plan", "--spec", spec, "--output", "json", check=True).json()
    assert planned["rollout"]["max_in_flight_per_reservation"] == 2
    assert planned["rollout"]["waves"][0]["reservations"] == {f"p/c{i}": "reservation-1" for i in range(1, 7)}

    up = npa("up", "--spec", spec, "--yes", "--no-preflight", "--output", "json")
    assert up.code == 0, up.stderr[-4000:]
    stacks = by_stack(up.json())
    assert all(stacks[f"lim.p.c{i}"]["status"] == "deployed" for i in range(1, 7)), stacks

    intervals = _provisioning_intervals(BLOCK)
    assert len(intervals) == 6, intervals
    assert _most_at_once(intervals) == 2, sorted(intervals)  # the limit, and used: never one at a time
