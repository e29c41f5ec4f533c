"""A repeat deploy is charged only what the live cluster does not hold yet, on live proof of what decides
capacity (the node groups' template, count and reservation binding; the cluster's identity), never on the
stack's fingerprint. The fleet's reserved pool fills its capacity block exactly, so anything charged
against the block is a refusal, not just a bigger number:

* a gate-only edit (which moves the fingerprint, as an upgrade of npa-pulumi, Pulumi or terraform does)
  is charged nothing: `preflight` passes (exit 0) and says why;
* one more node is charged exactly that node (one new group of the split pool): `preflight` fails (exit 1)
  and says what it is charged;
* a reserved group changed out of band (its preset, its preemptibility, its reservation binding), though
  the stacks still match the spec, is charged again as a whole group, and only that group; put back, it
  is proven again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import npa, write_spec

from npa_pulumi.simulator.simulator import LocalSimulator

pytestmark = pytest.mark.integration

PROJECT = "project-existing1"
BLOCK = "capacityblockgroup-local1"  # 8 GPUs in the local tenant
STACK = f"proof.{PROJECT}.reserved"


def _spec(gpu_count: int = 4, gate: str = "") -> str:
    return f"""\
apiVersion: npa.fleet/v0.0.1
name: proof
region: us-central1
projects:
  - project_id: {PROJECT}
    clusters:
      - name: reserved
        cpu_nodes: {{count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
        gpu_nodes:
          count: {gpu_count}
          platform: gpu-rtx6000
          preset: 2gpu-48vcpu-436gb
          capacity_block_group: {BLOCK}
        enable_filestore: false
        gpu_health_stabilization_seconds: 0
        gpu_cuda_smoke: false
{gate}"""


# The health gate's settings are in the plan (so in the fingerprint) only when the cluster has a Kubernetes
# API for the gate to run against: the test's clusters do (`kube_api`).
GATE_EDIT = "        gpu_health_timeout_minutes: 45\n"


def _preflight(spec: Path) -> tuple[int, dict[str, Any]]:
    result = npa("preflight", "--spec", str(spec), "--output", "json")
    assert result.code in (0, 1) and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert BLOCK not in result.stdout and BLOCK not in result.stderr  # masked everywhere
    document: dict[str, Any] = result.json()
    assert result.code == (0 if document["ok"] else 1), document
    return result.code, document


def _charged(report: dict[str, Any]) -> int:
    return sum(int(b["required_gpus"]) for b in report["capacity_blocks"])


def _deployed(report: dict[str, Any]) -> dict[str, Any]:
    [line] = report["deployed"]
    assert line["target"] == f"{PROJECT}/reserved" and line["stack"] == STACK, line
    return dict(line)


def _fingerprint_moved(spec: Path) -> bool:
    """Whether `up` of `spec` would record another fingerprint than the deployed stack's (the SDK's
    façade, as `up` computes it)."""
    from npa_pulumi.sdk.operations import open_fleet, select
    from npa_pulumi.sdk.requests import FleetRequest

    fleet = open_fleet(select(str(spec)), FleetRequest())
    context = fleet.context
    try:
        planned = context.fingerprint(context.plans().cluster(STACK))
        recorded = str(
            (context.stack_outputs(context.target_ops())[STACK] or {}).get("npa_fingerprint") or ""
        )
    finally:
        fleet.close()
    assert recorded, "the deployed stack records no fingerprint"
    return planned != recorded


def test_a_full_block_passes_a_gate_only_edit_fails_one_more_node_and_charges_out_of_band_changes(
    kube_api: Path, tmp_path: Path
) -> None:
    npa("local-cloud", "init", check=True)
    spec = write_spec(tmp_path / "fleet.yaml", _spec())
    code, fresh = _preflight(spec)
    assert code == 0 and _charged(fresh) == 8 and fresh["deployed"] == [], fresh
    up = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert up.code == 0, up.stderr[-3000:]

    code, repeat = _preflight(spec)
    assert code == 0 and _charged(repeat) == 0 and repeat["requirements"] == [], repeat
    assert _deployed(repeat)["charge"] == "zero"
    assert any("live proof" in n for n in repeat["notes"]), repeat["notes"]

    # A gate-only edit: another fingerprint, the same capacity. Nothing is charged; the report says why.
    gated = write_spec(tmp_path / "gated.yaml", _spec(gate=GATE_EDIT))
    assert _fingerprint_moved(gated)
    code, after_edit = _preflight(gated)
    assert code == 0 and _charged(after_edit) == 0 and after_edit["requirements"] == [], after_edit
    line = _deployed(after_edit)
    assert (line["charge"], line["charged"], line["reserved_gpus"]) == ("zero", [], []), line
    text = npa("preflight", "--spec", str(gated))
    assert text.code == 0, text.stdout[-3000:] + text.stderr[-3000:]
    assert f"{PROJECT}/reserved: deployed, charged zero (live proof)" in " ".join(text.stdout.split())

    # One node more: one new group of the split pool, exactly one node's GPUs against the full block.
    grown = write_spec(tmp_path / "grown.yaml", _spec(gpu_count=5, gate=GATE_EDIT))
    code, after_node = _preflight(grown)
    assert code == 1 and _charged(after_node) == 2, after_node
    [block] = after_node["capacity_blocks"]
    assert (block["status"], block["reason"]) == ("rejected", "needs 2 GPUs, only 0 reserved GPUs remain")
    line = _deployed(after_node)
    assert line["charge"] == "difference" and [b["gpus"] for b in line["reserved_gpus"]] == [2], line
    assert any(r.startswith("new GPU node group: 1 node(s) charged") for r in line["reasons"]), line
    charged = {c["name"]: c["amount"] for c in line["charged"]}
    assert charged["compute.instance.count"] == 1 and "mk8s.cluster.count" not in charged, charged
    text = npa("preflight", "--spec", str(grown))
    assert text.code == 1 and "charged the difference (live proof)" in " ".join(text.stdout.split())

    # Out of band: the changed group alone is charged again, as a whole group (one node, 2 GPUs). Only a
    # group that left the block frees its GPUs there, so only then does charging it again fit.
    sim = LocalSimulator(kube_api / ".npa-pulumi" / "local-cloud", auto_init=False)
    [cluster] = sim.list_clusters(PROJECT)
    gpu_groups = sorted(
        (g for g in sim.list_node_groups(cluster["id"]) if g["platform"].startswith("gpu-")),
        key=lambda g: g["name"],
    )
    assert len(gpu_groups) == 4  # a reserved PCIe pool: one node per group, each matched on its own
    changed = gpu_groups[1]
    original: dict[str, Any] = {
        "preset": "2gpu-48vcpu-436gb",
        "preemptible": False,
        "reservation_policy": "STRICT",
    }
    changes: tuple[tuple[dict[str, Any], str, bool], ...] = (
        ({"preset": "1gpu-24vcpu-218gb"}, "preset 1gpu-24vcpu-218gb, 2gpu-48vcpu-436gb requested", False),
        ({"preemptible": True}, "a reserved pool must not be preemptible", False),
        ({"reservation_policy": "AUTO"}, "bound to AUTO", False),
        (
            {"reservation_ids": ["capacityblockgroup-local2"]},
            "bound to STRICT [capacityblockgroup-…al2]",
            True,
        ),
    )
    for change, named, fits in changes:
        sim.edit_node_group_template(changed["id"], **change)  # behind the fleet's back
        code, report = _preflight(spec)
        assert _charged(report) == 2 and report["ok"] is fits, (change, report)
        line = _deployed(report)
        assert line["charge"] == "difference", (change, line)
        assert any(
            f"node group {changed['name']} charged in full" in r and named in r for r in line["reasons"]
        ), (change, line)
        assert any("charged in full" in n and named in n for n in report["notes"]), (change, report["notes"])
        sim.edit_node_group_template(changed["id"], **original, reservation_ids=[BLOCK])
        code, proven = _preflight(spec)
        assert code == 0 and _charged(proven) == 0, (change, proven)
