"""A repeat deploy counts an existing cluster as zero new demand only on live proof: a reserved GPU pool
changed out of band (its preset, its preemptibility, its reservation binding), though the stacks still
match the spec, is charged in full again; put back, it is proven again. The pool takes its whole
capacity block, so charging it again is a refusal, not just a bigger number."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import npa, write_spec

from npa_pulumi.simulator.simulator import LocalSimulator

pytestmark = pytest.mark.integration

PROJECT = "project-existing1"
BLOCK = "capacityblockgroup-local1"  # 8 GPUs in the local tenant
SPEC = f"""\
apiVersion: npa.fleet/v0.0.1
name: proof
region: us-central1
projects:
  - project_id: {PROJECT}
    clusters:
      - name: reserved
        cpu_nodes: {{count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
        gpu_nodes:
          {{count: 4, platform: gpu-rtx6000, preset: 2gpu-48vcpu-436gb, capacity_block_group: {BLOCK}}}
        enable_filestore: false
"""


def _preflight(spec: Path) -> dict[str, Any]:
    result = npa("preflight", "--spec", str(spec), "--output", "json")
    assert result.code in (0, 1) and "Traceback" not in result.stderr, result.stderr[-3000:]
    document: dict[str, Any] = result.json()
    return document


def _charged(report: dict[str, Any]) -> int:
    return sum(int(b["required_gpus"]) for b in report["capacity_blocks"])


def test_an_out_of_band_change_to_a_reserved_pool_is_charged_again(
    isolated_home: Path, tmp_path: Path
) -> None:
    npa("local-cloud", "init", check=True)
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    fresh = _preflight(spec)
    assert fresh["ok"] and _charged(fresh) == 8, fresh
    up = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert up.code == 0, up.stderr[-3000:]

    repeat = _preflight(spec)
    assert repeat["ok"] and _charged(repeat) == 0, repeat
    assert any("live proof" in n for n in repeat["notes"]), repeat["notes"]

    sim = LocalSimulator(isolated_home / ".npa-pulumi" / "local-cloud", auto_init=False)
    [cluster] = sim.list_clusters(PROJECT)
    gpu_groups = sorted(
        (g for g in sim.list_node_groups(cluster["id"]) if g["platform"].startswith("gpu-")),
        key=lambda g: g["name"],
    )
    assert len(gpu_groups) == 4  # a reserved PCIe pool: one node per group, each matched on its own
    changed = gpu_groups[1]["id"]
    original: dict[str, Any] = {
        "preset": "2gpu-48vcpu-436gb",
        "preemptible": False,
        "reservation_policy": "STRICT",
    }
    changes: tuple[tuple[dict[str, Any], str], ...] = (
        ({"preset": "1gpu-24vcpu-218gb"}, "preset 1gpu-24vcpu-218gb, 2gpu-48vcpu-436gb requested"),
        ({"preemptible": True}, "preemptible"),
        ({"reservation_policy": "AUTO"}, "bound to AUTO"),
        ({"reservation_ids": ["capacityblockgroup-local2"]}, "bound to STRICT [capacityblockgroup-…al2]"),
    )
    for change, named in changes:
        sim.edit_node_group_template(changed, **change)  # behind the fleet's back
        report = _preflight(spec)
        assert _charged(report) == 8 and not report["ok"], (change, report)
        assert any("charged in full" in n and named in n for n in report["notes"]), (change, report["notes"])
        sim.edit_node_group_template(changed, **original, reservation_ids=[BLOCK])
        proven = _preflight(spec)
        assert proven["ok"] and _charged(proven) == 0, (change, proven)
