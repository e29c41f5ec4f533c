"""`health` on the local cloud, with the real engine and a real API server: a GPU cluster whose nodes
Nebius then marks (a NebiusGPUError node, a maintenance event with its reason code on another, a third
replaced by auto-repair: a new node with a new name) is read through its registered kubeconfig; the JSON
names each node with its condition or reason code, counts the usable GPUs and exits 1 below --min-usable;
`--notify` posts nothing for the healthy fleet, one event for the degraded one, and `--watch` nothing more
while nothing changes; `health --requalify --yes` runs the gate's probes on exactly the replaced node and
qualifies it, and the audit trail records that repair (in counts, without node names). `health --watch`
then serves the series on its metrics port (read over HTTP while it runs: the buckets, the condition, the
maintenance reason code and the seconds since the gate passed) and, once the maintenance is finished
between its two reads, appends the transitions to its events file."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from fleet_helpers import CLI, REPO, by_stack, health_nodes, health_report, npa, write_spec
from webhook_support import Webhook

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: hl
region: us-central1
project_prefix: "hl-"
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
        gpu_nodes: {count: 3, platform: gpu-h200-sxm, preset: 1gpu-16vcpu-200gb}
        enable_gpu_cluster: false
"""


def test_health_names_nebius_faults_and_requalifies_a_replaced_node(
    kube_api: Path, tmp_path: Path, webhook: Webhook
) -> None:
    npa("local-cloud", "init", check=True)
    spec = str(write_spec(tmp_path / "fleet.yaml", SPEC))
    up = npa("up", "--spec", spec, "--yes", "--output", "json")
    assert up.code == 0, up.stderr[-4000:]
    train = by_stack(up.json())["hl.p.train"]
    cluster_id = train["cluster_id"]

    code, document = health_report(spec, "--notify", webhook.url)
    assert code == 0, document
    assert webhook.events == []  # a healthy fleet: nothing to say
    assert document["totals"]["requested"] == 3 and document["totals"]["usable"] == 3
    gpu = sorted(name for name, n in health_nodes(document).items() if n["gpu"])
    assert len(gpu) == 3 and all(health_nodes(document)[n]["qualification"] == "gate" for n in gpu)
    broken, serviced, replaced = gpu

    node = ["local-cloud", "fault", "node", "--cluster", cluster_id, "--node"]
    npa(*node, broken, "--kind", "nebius-gpu-error", check=True)
    npa(
        "local-cloud", "maintenance", "add", "--cluster", cluster_id, "--node", serviced,
        "--reason", "HW_GPU_XID_79", check=True,
    )  # fmt: skip
    npa(*node, replaced, "--kind", "replace", check=True)

    deadline = time.monotonic() + 120
    while True:
        code, document = health_report(spec)
        nodes = health_nodes(document)
        newcomer = sorted(set(n for n, v in nodes.items() if v["gpu"]) - set(gpu))
        settled = (
            newcomer
            and replaced not in nodes
            and nodes[newcomer[0]]["ready"]
            and nodes[broken]["state"] == "degraded"
            and nodes[serviced]["state"] == "maintenance"
        )
        if settled or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert settled, document
    assert code == 1
    [cluster] = document["clusters"]
    assert cluster["status"] == "below-min-usable" and "0 of 3 GPUs usable" in cluster["error"]
    assert [c["type"] for c in nodes[broken]["conditions"]] == ["NebiusGPUError"]
    assert nodes[broken]["conditions"][0]["message"]
    assert [m["reason"] for m in nodes[serviced]["maintenance"]] == ["HW_GPU_XID_79"]
    assert "NebiusMaintenanceScheduled" in [c["type"] for c in nodes[serviced]["conditions"]]
    fresh = nodes[newcomer[0]]
    assert (fresh["state"], fresh["qualification"]) == ("unqualified", "unqualified")
    totals = document["totals"]
    assert (totals["usable"], totals["degraded"], totals["maintenance"], totals["unqualified"]) == (
        0,
        1,
        1,
        1,
    )
    [project] = document["projects"]
    assert [(m["reason"], m["node"]) for m in project["maintenance"]] == [("HW_GPU_XID_79", serviced)]

    # ---- the webhook: one event for the degraded cluster; a watch over an unchanged fleet adds none
    code, _ = health_report(spec, "--notify", webhook.url)
    [event] = webhook.events
    assert event["command"] == "health" and event["events"] == ["below-min-usable"]
    [told] = event["clusters"]
    assert (told["stack"], told["usable"], told["requested"], told["degraded"]) == ("hl.p.train", 0, 3, 1)
    assert "NebiusGPUError" in " ".join(told["problems"]) and broken not in str(event)
    watched = npa(
        "health", "--spec", spec, "--watch", "--interval", "1s", "--iterations", "2", "--notify", webhook.url,
        "--output", "json",
    )  # fmt: skip
    assert watched.code == 1, watched.stderr[-3000:]
    # its first read (a fleet degraded when the watch starts), then no change; that first read of the watch
    # also trips the repair ladder's breakers (1 of the 3 GPU nodes impaired: more than 20 %), once
    assert [e["events"] for e in webhook.events[1:]] == [["below-min-usable"], ["breaker-open"]]
    assert webhook.events[2]["breakers_opened"] == ["cluster:p/train", "fleet"]

    # ---- requalification: the gate's probes on exactly the replaced node, recorded, then read back
    code, requalified = health_report(spec, "--requalify", "--yes")
    [cluster] = requalified["clusters"]
    assert cluster["requalify"]["nodes"] == newcomer and cluster["requalify"]["passed"] == newcomer
    assert health_nodes(requalified)[newcomer[0]]["qualification"] == "requalified"
    assert health_nodes(requalified)[newcomer[0]]["requalification"]["probes"]["smoke"]["passed"] is True
    assert code == 1 and requalified["totals"]["usable"] == 1  # the other two are still down
    code, again = health_report(spec, "--min-usable", "0.3")
    assert code == 0 and health_nodes(again)[newcomer[0]]["state"] == "usable"

    # ---- the repair is in the audit trail: who, what, per cluster in counts (no node names)
    records = npa("audit", "--spec", spec, "--output", "json", check=True).json()["records"]
    assert [(r["command"], r.get("repair")) for r in records] == [("up", None), ("health", "requalify")]
    [outcome] = records[1]["stacks"]
    assert (outcome["stack"], outcome["status"]) == ("hl.p.train", "requalified")
    assert outcome["detail"] == "probed 1 unqualified node(s): 1 passed, 0 failed"
    assert records[1]["totals"]["passed"] == 1 and records[1]["who"]["os_user"]
    assert newcomer[0] not in json.dumps(records)

    # ---- over time: the metrics endpoint while `--watch` runs, and the events between its two reads
    _watch(spec, tmp_path, cluster_id, serviced, broken)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _metrics(port: int, deadline: float) -> str:
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                text = str(response.read().decode())
            if "npa_health_gpus{" in text:
                return text
        except OSError:
            pass
        assert time.monotonic() < deadline, "the metrics endpoint never served a read"
        time.sleep(0.5)


def _watch(spec: str, tmp_path: Path, cluster_id: str, serviced: str, broken: str) -> None:
    port, events = _free_port(), tmp_path / "events.jsonl"
    args = ["health", "--spec", spec, "--watch", "--interval", "20s", "--iterations", "2"]
    args += ["--metrics-port", str(port), "--events", str(events), "--output", "json"]
    watcher = subprocess.Popen(
        [*CLI, *args], cwd=REPO, env=os.environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        text = _metrics(port, time.monotonic() + 120)
        labels = 'cluster="train",fleet="hl",project="p"'
        assert f'npa_health_gpus{{bucket="requested",{labels}}} 3.0' in text
        assert f'npa_health_gpus{{bucket="degraded",{labels}}} 1.0' in text
        condition = f'condition="NebiusGPUError",fleet="hl",node="{broken}",project="p"}} 1.0'
        assert f'npa_health_node_condition{{cluster="train",{condition}' in text
        reason = f'node="{serviced}",project="p",reason="HW_GPU_XID_79"}} 1.0'
        assert reason in text
        since = next(
            line for line in text.splitlines() if line.startswith("npa_health_seconds_since_gate_pass{")
        )
        assert labels in since and 0 < float(since.rsplit(" ", 1)[1]) < 3600, since
        # Between the two reads, Nebius finishes the maintenance.
        npa("local-cloud", "maintenance", "finish", "--cluster", cluster_id, "--node", serviced, check=True)
        stdout, stderr = watcher.communicate(timeout=180)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert watcher.returncode == 1, stderr[-3000:]  # still below --min-usable
    last = json.loads(stdout)
    assert health_nodes(last)[serviced]["state"] == "usable"
    found = [json.loads(line) for line in events.read_text().splitlines()]
    assert {(e["event"], e["node"]) for e in found} == {
        ("maintenance-finished", serviced),
        ("node-recovered", serviced),
    }, found
