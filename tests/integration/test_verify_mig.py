"""MIG end to end on the local cloud, with the real engine and API servers: a MIG fleet is `deployed`
(validation `mig`) once the exact mixed / all-balanced layout holds; `verify-mig` reads it through the
registered kubeconfig; a stale `nvidia.com/gpu=mig-not-ready:NoSchedule` taint makes it not ready;
`--reconcile` refuses while a GPU pod runs, then removes exactly that taint and nothing else; both repair
runs are in the audit trail (counts, no node names), the read-only runs are not."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import REPO, assert_publishable, by_stack, npa, private_evidence, write_spec

from npa_pulumi.simulator.kube import binaries

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: migv
region: us-central1
project_prefix: "migv-"
defaults:
  k8s_version: "1.34"
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  gpu_nodes:
    count: 2
    platform: gpu-rtx6000
    preset: 1gpu-24vcpu-218gb
    disk_size_gib: 128
    capacity_block_group: capacityblockgroup-local1
  enable_gpu_cluster: false
  enable_filestore: false
  gpu_health_stabilization_seconds: 0
  gpu_health_timeout_minutes: 2
  mig: {enabled: true, strategy: mixed, config: all-balanced}
projects:
  - project_id: project-existing1
    clusters:
      - name: mig
"""


def _kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> Any:
    kubectl = binaries.find("kubectl")
    assert kubectl is not None
    proc = subprocess.run(
        [str(kubectl), "--kubeconfig", kubeconfig, *args, "-o", "json"],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


GPU_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  nodeName: NODE
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers: [{name: t, image: train, resources: {limits: {nvidia.com/mig-1g.24gb: "1"}}}]
"""


def test_verify_mig_reads_and_repairs_exactly_the_stale_taint(kube_api: Path, tmp_path: Path) -> None:
    npa("local-cloud", "init", check=True)
    spec = str(write_spec(tmp_path / "fleet.yaml", SPEC))
    up = npa("up", "--spec", spec, "--yes", "--output", "json")
    assert up.code == 0, up.stderr[-4000:] + up.stdout[-2000:]
    cluster = by_stack(up.json())["migv.project-existing1.mig"]
    assert (cluster["status"], cluster["validation"]) == ("deployed", "mig")
    kubeconfig = cluster["kubeconfig"]

    evidence_dir = tmp_path / "evidence"
    private = ["--evidence-dir", str(evidence_dir)]
    ready = npa("verify-mig", "--spec", spec, *private, "--output", "json")
    assert ready.code == 0, ready.stdout[-3000:]
    assert_publishable(ready, evidence_dir)
    [entry] = ready.json()["clusters"]
    assert entry["status"] == "ready" and entry["health"]["snapshots"] >= 2

    # ---- the GPU operator's stale taint on one node
    nodes = _kubectl(kubeconfig, "get", "nodes", "-l", "nvidia.com/gpu.present=true")["items"]
    node = sorted(n["metadata"]["name"] for n in nodes)[0]
    fault = ["local-cloud", "fault", "node", "--cluster", cluster["cluster_id"], "--node", node]
    npa(*fault, "--kind", "mig-not-ready-taint", check=True)
    stale_taint = {"key": "nvidia.com/gpu", "value": "mig-not-ready", "effect": "NoSchedule"}
    deadline = time.monotonic() + 20
    while stale_taint not in _kubectl(kubeconfig, "get", "node", node)["spec"].get("taints", []):
        assert time.monotonic() < deadline, "the cluster's agent never carried out the taint event"
        time.sleep(0.3)
    stale = npa(
        "verify-mig", "--spec", spec, "--wait", "--timeout-minutes", "0.2", *private, "--output", "json"
    )
    assert stale.code == 1
    assert_publishable(stale, evidence_dir)
    [entry] = stale.json()["clusters"]
    assert entry["status"] == "not-ready" and "stale-taint (1)" in entry["error"], entry["error"]
    [kept] = private_evidence(evidence_dir).values()
    assert "mig-not-ready" in kept["error"] and node in kept["error"]

    # ---- a GPU workload runs: the repair is refused and nothing is touched
    _kubectl(kubeconfig, "apply", "-f", "-", stdin=GPU_POD.replace("NODE", node))
    refused = npa("verify-mig", "--spec", spec, "--reconcile", *private, "--output", "json")
    assert refused.code == 1
    assert_publishable(refused, evidence_dir)
    [entry] = refused.json()["clusters"]
    assert "1 GPU workload(s)" in entry["error"] and entry["health"]["repaired_stale_taint"] == 0
    [kept] = private_evidence(evidence_dir).values()
    assert "default/trainer" in kept["error"] and kept["evidence"]["repaired"] == []
    taints = _kubectl(kubeconfig, "get", "node", node)["spec"]["taints"]
    assert stale_taint in taints

    # ---- once it is gone: exactly the stale taint is removed, a user's taint stays
    kubectl = str(binaries.find("kubectl"))
    subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig, "taint", "node", node, "team=ml:PreferNoSchedule"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            str(binaries.find("kubectl")),
            "--kubeconfig",
            kubeconfig,
            "delete",
            "pod",
            "trainer",
            "--wait=false",
        ],
        check=True,
        capture_output=True,
    )
    repaired = npa(
        "verify-mig", "--spec", spec, "--wait", "--reconcile", "--timeout-minutes", "1",
        "--evidence-dir", str(evidence_dir), "--output", "json",
    )  # fmt: skip
    assert repaired.code == 0, repaired.stdout[-3000:]
    [entry] = repaired.json()["clusters"]
    assert entry["status"] == "ready" and entry["health"]["repaired_stale_taint"] == 1
    assert_publishable(repaired, evidence_dir)
    taints = _kubectl(kubeconfig, "get", "node", node)["spec"]["taints"]
    assert stale_taint not in taints
    assert {"key": "team", "value": "ml", "effect": "PreferNoSchedule"} in taints
    [receipt] = list(evidence_dir.iterdir())
    assert (
        stat.S_IMODE(evidence_dir.stat().st_mode) == 0o700 and stat.S_IMODE(receipt.stat().st_mode) == 0o600
    )
    document = json.loads(receipt.read_text())
    assert document["evidence"]["ready"] is True and document["evidence"]["repaired_stale_taint_on"] == [node]

    # ---- the repairs (refused, then done) are audited; the plain reads are not
    records = npa("audit", "--spec", spec, "--output", "json", check=True).json()["records"]
    assert [(r["command"], r.get("repair"), r["outcome"]) for r in records] == [
        ("up", None, "ok"),
        ("verify-mig", "reconcile", "failed"),
        ("verify-mig", "reconcile", "ok"),
    ]
    details = [(s["status"], s["detail"]) for r in records[1:] for s in r["stacks"]]
    assert details == [
        ("not-ready", "nothing to repair"),
        ("ready", "removed the stale mig-not-ready taint from 1 node(s)"),
    ]
    assert node not in json.dumps(records)

    # ---- evidence is never written into a repository; a CPU-only selection is not a MIG cluster
    inside = npa("verify-mig", "--spec", spec, "--evidence-dir", str(Path(__file__).parent / "ev"))
    assert inside.code == 2 and "git work tree" in inside.stderr
    assert not (Path(__file__).parent / "ev").exists()


@pytest.mark.long
def test_a_recipe_that_ignores_a_pin_is_deployed_mig_not_ready(kube_api: Path, tmp_path: Path) -> None:
    """A recipe whose GPU operator chart installs another MIG Manager than the spec pins: the layout is
    exact, but the gate reads the operator's ClusterPolicy and DaemonSets, so the cluster is kept as
    `deployed-mig-not-ready` with the mismatch in its evidence (and in `status`)."""
    recipe = tmp_path / "recipe"
    shutil.copytree(REPO / "recipes" / "local-k8s-training", recipe)
    addons = recipe / "addons.tf"
    pinned = 'mig_manager   = var.gpu_mig_manager_version == null ? "" : var.gpu_mig_manager_version'
    assert pinned in addons.read_text()
    addons.write_text(addons.read_text().replace(pinned, 'mig_manager   = "v0.14.1"'))
    npa("local-cloud", "init", check=True)
    spec = str(
        write_spec(
            tmp_path / "fleet.yaml",
            SPEC.replace("gpu_health_timeout_minutes: 2", "gpu_health_timeout_minutes: 1"),
        )
    )
    up = npa("up", "--spec", spec, "--recipe-dir", str(recipe), "--yes", "--output", "json")
    assert up.code == 1, up.stderr[-4000:]
    cluster = by_stack(up.json())["migv.project-existing1.mig"]
    assert (cluster["status"], cluster["validation"]) == ("deployed-mig-not-ready", "mig")
    errors = cluster["health"]["last_errors"]
    assert "ClusterPolicy cluster-policy: migManager.version 'v0.14.1', v0.14.2 pinned" in errors, errors
    assert all("igManager" in e or "nvidia-mig-manager" in e for e in errors), errors
    assert cluster["retry_command"] and " up " in cluster["retry_command"]
    status = npa("status", "--spec", spec, "--recipe-dir", str(recipe), "--output", "json")
    assert by_stack(status.json())["migv.project-existing1.mig"]["status"] == "deployed-mig-not-ready"
