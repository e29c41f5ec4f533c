"""The repair ladder on the local cloud, with the real engine and a real API server (issue #59): a node
Nebius marks NebiusGPUError opens an incident that `health --watch` records in its ledger (0600) while
`health --remediate --dry-run` only shows the plan (the first rung: the gate) and records nothing; once the
fault clears the node stays `unqualified` (validated return) until `health --requalify --yes` passes on
it, and the next watch read closes the incident with its time to repair. `--watch --remediate --yes` then
climbs the ladder on another node, one rung a read (the gate, which fails while the fault is there; the
cordon; the gate again once it cleared; its scheduling restored on the return), receipted, in the events
file and audited without node names. Two more faulty nodes of five
trip the cluster's and the fleet's breakers in that read, with the watcher's identity: the dry run then
holds every action, and a reset by that same identity is refused."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import by_stack, health_nodes, health_report, npa, write_spec

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: rl
region: us-central1
project_prefix: "rl-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
  gpu_health_stabilization_seconds: 1
  gpu_health_timeout_minutes: 2
  gpu_cuda_smoke: true
projects:
  - name: p
    clusters:
      - name: train
        gpu_nodes: {count: 5, platform: gpu-h200-sxm, preset: 1gpu-16vcpu-200gb}
        enable_gpu_cluster: false
"""


def _until(spec: str, settled: Any, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        _code, document = health_report(spec)
        if settled(health_nodes(document)):
            return document
        assert time.monotonic() < deadline, f"never {what}: {json.dumps(health_nodes(document))[:3000]}"
        time.sleep(2)


def _watch_once(spec: str) -> dict[str, Any]:
    result = npa(
        "health", "--spec", spec, "--watch", "--interval", "1s", "--iterations", "1", "--output", "json"
    )
    assert result.code in (0, 1), result.stderr[-3000:]
    document: dict[str, Any] = result.json()
    return document


def _remediate(spec: str, events: Path) -> dict[str, Any]:
    result = npa(
        "health", "--spec", spec, "--watch", "--remediate", "--yes", "--interval", "1s", "--iterations", "1",
        "--events", str(events), "--output", "json",
    )  # fmt: skip
    assert result.code in (0, 1), result.stderr[-3000:]
    document: dict[str, Any] = result.json()
    return document


def test_the_ladder_records_incidents_validates_the_return_and_trips_its_breakers(
    kube_api: Path, tmp_path: Path
) -> None:
    npa("local-cloud", "init", check=True)
    spec = str(write_spec(tmp_path / "fleet.yaml", SPEC))
    up = npa("up", "--spec", spec, "--yes", "--output", "json")
    assert up.code == 0, up.stderr[-4000:]
    cluster_id = by_stack(up.json())["rl.p.train"]["cluster_id"]
    ledger = kube_api / ".npa-pulumi" / "health" / "remediation" / "rl.json"

    code, document = health_report(spec)
    assert code == 0 and document["remediation"]["numbers"]["fleet"]["incidents"] == 0
    fleet = {b["scope"]: b for b in document["remediation"]["breakers"]}["fleet"]
    assert (fleet["open"], fleet["total"]) == (False, 5)
    gpu = sorted(name for name, n in health_nodes(document).items() if n["gpu"])
    broken = gpu[0]

    fault = ["local-cloud", "fault", "node", "--cluster", cluster_id, "--node"]
    npa(*fault, broken, "--kind", "nebius-gpu-error", check=True)
    _until(spec, lambda nodes: nodes[broken]["state"] == "degraded", "degraded")

    # ---- the dry run: the plan, nothing recorded
    code, planned = health_report(spec, "--remediate", "--dry-run")
    [decision] = planned["remediation"]["decisions"]
    assert (decision["node"], decision["reason"], decision["status"], decision["rung"]) == (
        broken,
        "gpu-error",
        "act",
        "requalify",
    )
    assert planned["remediation"]["unavailable"] == {}  # the port offers every rung
    assert health_nodes(planned)[broken]["gpu_workloads"] == []
    assert not ledger.exists()

    # ---- the watch records the incident in its ledger
    watched = _watch_once(spec)
    assert stat.S_IMODE(ledger.stat().st_mode) == 0o600
    [incident] = json.loads(ledger.read_text())["incidents"]
    assert (incident["node"], incident["reason"], incident["closed"]) == (broken, "gpu-error", None)
    assert watched["remediation"]["numbers"]["fleet"]["open"] == 1
    assert not any(b["open"] for b in watched["remediation"]["breakers"])  # 1 of 5: 20 %, not more

    # ---- Nebius repairs it: usable only once its gate passes again
    npa(*fault, broken, "--kind", "nebius-gpu-error", "--clear", check=True)
    document = _until(spec, lambda nodes: not nodes[broken]["conditions"], "cleared")
    waiting = health_nodes(document)[broken]
    assert (waiting["state"], waiting["incident"]) == ("unqualified", "gpu-error")
    assert any("open gpu-error incident since" in p for p in waiting["problems"])
    code, planned = health_report(spec, "--remediate", "--dry-run")
    assert code == 1  # 4 of 5 GPUs usable, below --min-usable 1
    [decision] = planned["remediation"]["decisions"]
    assert (decision["status"], decision["rung"]) == ("act", "requalify")
    assert "the fault cleared" in decision["why"]
    code, requalified = health_report(spec, "--requalify", "--yes")
    assert requalified["clusters"][0]["requalify"]["passed"] == [broken]
    assert code == 0 and health_nodes(requalified)[broken]["state"] == "usable"
    closed = _watch_once(spec)
    [incident] = json.loads(ledger.read_text())["incidents"]
    assert incident["closed"] == "returned"
    [node] = closed["remediation"]["numbers"]["nodes"]
    assert node["node"] == broken and node["incidents"] == 1 and node["mttr_s"] > 0

    # ---- the watch acts: the gate first (it fails: the fault is still there), then the cordon; once the
    # fault clears, the gate again, and on the validated return the node is schedulable again
    acted = gpu[3]
    npa(*fault, acted, "--kind", "nebius-gpu-error", check=True)
    _until(spec, lambda nodes: nodes[acted]["state"] == "degraded", "degraded")
    events = tmp_path / "events.jsonl"
    first = _remediate(spec, events)
    [action] = first["remediation"]["actions"]
    assert (action["node"], action["rung"], action["outcome"]) == (acted, "requalify", "done")
    assert action["detail"].startswith("the gate's probes failed")
    assert stat.S_IMODE(Path(action["receipt"]).stat().st_mode) == 0o600
    second = _remediate(spec, events)
    [action] = second["remediation"]["actions"]
    assert (action["rung"], action["outcome"], action["detail"]) == ("cordon-and-report", "done", "cordoned")
    assert health_nodes(health_report(spec)[1])[acted]["cordoned"] is True
    npa(*fault, acted, "--kind", "nebius-gpu-error", "--clear", check=True)
    _until(spec, lambda nodes: not nodes[acted]["conditions"], "cleared")
    third = _remediate(spec, events)
    [action] = third["remediation"]["actions"]
    assert (action["rung"], action["outcome"]) == ("requalify", "done") and "passed" in action["detail"]
    fourth = _remediate(spec, events)
    [action] = fourth["remediation"]["actions"]
    assert (action["node"], action["rung"], action["outcome"]) == (acted, "restore-scheduling", "done")
    code, document = health_report(spec)
    assert code == 0 and health_nodes(document)[acted]["state"] == "usable"
    logged = [json.loads(line) for line in events.read_text().splitlines()]
    ladder = [(e["rung"], e["outcome"]) for e in logged if e["event"] == "remediation-action"]
    assert ladder == [
        ("requalify", "done"),
        ("cordon-and-report", "done"),
        ("requalify", "done"),
        ("restore-scheduling", "done"),
    ]
    records = npa("audit", "--spec", spec, "--output", "json", check=True).json()["records"]
    remediated = [r for r in records if r.get("repair") == "remediate"]
    assert len(remediated) == 4 and acted not in json.dumps(remediated)

    # ---- two more of five at once: the breakers trip in that read, and hold every action
    for name in gpu[1:3]:
        npa(*fault, name, "--kind", "nebius-gpu-error", check=True)
    _until(spec, lambda nodes: all(nodes[n]["state"] == "degraded" for n in gpu[1:3]), "degraded")
    tripped = _watch_once(spec)
    opened = {b["scope"]: b for b in tripped["remediation"]["breakers"] if b["open"]}
    assert set(opened) >= {"fleet", "cluster:p/train"}
    watcher = opened["fleet"]["opened_by"]
    assert watcher and (opened["fleet"]["impaired"], opened["fleet"]["total"]) == (2, 5)
    code, held = health_report(spec, "--remediate", "--dry-run")
    decisions = held["remediation"]["decisions"]
    assert sorted(d["node"] for d in decisions) == gpu[1:3]
    assert all(d["status"] == "hold" and "breaker" in d["why"] for d in decisions)
    text = npa("health", "--spec", spec)
    assert "breaker OPEN fleet: " in text.stdout, text.stdout
    assert f"by another identity than {watcher!r}" in text.stdout

    # ---- the watcher cannot close its own breaker
    refused = npa("health", "breaker", "reset", "--spec", spec, "--scope", "fleet")
    assert refused.code == 1, refused.stderr
    assert "cannot be reset by that same identity" in refused.stderr
    assert json.loads(ledger.read_text())["breakers"]["fleet"]["opened_by"] == watcher
