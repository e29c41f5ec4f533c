"""MIG end to end on the local cloud, with the real engine and API servers: a MIG fleet is `deployed`
(validation `mig`) once the exact mixed / all-balanced layout holds; `verify-mig` reads it through the
registered kubeconfig; a stale `nvidia.com/gpu=mig-not-ready:NoSchedule` taint makes it not ready;
`--reconcile` refuses while a GPU pod runs, then removes exactly that taint and nothing else. Then the
skill's other repairs on the same fleet: an OnDelete driver update that left every driver pod on the old
template (`local-cloud fault driver --kind stale-template`) and a device plugin holding stale resources on
one node (`local-cloud fault node --kind stale-device-plugin`): refused with nothing changed while a GPU
workload runs; then `verify-mig --wait --reconcile` replaces the driver pods one worker at a time (each
node cordoned, the pod deleted by UID, a ready replacement, the node uncordoned), restarts GPU feature
discovery and then the device plugin, keeps a private receipt of every step and passes the full gate.
The repair runs are in the audit trail (counts, no node names), the read-only runs are not."""

from __future__ import annotations

import json
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import assert_publishable, by_stack, npa, private_evidence, write_spec
from upstream_library import writable_copy

from npa_pulumi.simulator.kube import binaries

pytestmark = pytest.mark.integration

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
    assert entry["health"]["repairs"]["refused_for_gpu_workloads"] == 1
    [kept] = private_evidence(evidence_dir).values()
    assert "default/trainer" in kept["error"] and kept["evidence"]["repairs_done"] == []
    taints = _kubectl(kubeconfig, "get", "node", node)["spec"]["taints"]
    assert stale_taint in taints
    [refusal] = _receipts(kube_api, cluster["kube_context"])
    assert [s["step"] for s in refusal["steps"]] == ["refused"]
    assert refusal["steps"][0]["workloads"] == ["default/trainer"]

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

    _stale_driver_and_device_plugin(kube_api, spec, cluster, evidence_dir)


def _receipts(home: Path, context: str) -> list[dict[str, Any]]:
    """The repair receipts under the npa home, oldest first; each private (0600 in a 0700 directory)."""
    directory = home / ".npa-pulumi" / "repairs" / context
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = sorted(directory.glob("*.json"))
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    return [json.loads(f.read_text()) for f in files]


def _driver_pods(kubeconfig: str) -> dict[str, str]:
    """node -> uid of its (live) driver pod."""
    pods = _kubectl(kubeconfig, "get", "pods", "-n", "gpu-operator", "-l", "app=nvidia-driver-daemonset")
    return {
        p["spec"]["nodeName"]: p["metadata"]["uid"]
        for p in pods["items"]
        if not p["metadata"].get("deletionTimestamp")
    }


def _discovery_generations(kubeconfig: str) -> dict[str, int]:
    return {
        name: _kubectl(kubeconfig, "get", "daemonset", "-n", "gpu-operator", name)["metadata"]["generation"]
        for name in ("gpu-feature-discovery", "nvidia-device-plugin-daemonset")
    }


def _stale_driver_and_device_plugin(
    kube_api: Path, spec: str, cluster: dict[str, Any], evidence_dir: Path
) -> None:
    kubeconfig, context = cluster["kubeconfig"], cluster["kube_context"]
    nodes = sorted(_driver_pods(kubeconfig))
    assert len(nodes) == 2
    npa(
        "local-cloud",
        "fault",
        "driver",
        "--cluster",
        cluster["cluster_id"],
        "--kind",
        "stale-template",
        check=True,
    )
    npa(
        "local-cloud", "fault", "node", "--cluster", cluster["cluster_id"], "--node", nodes[1],
        "--kind", "stale-device-plugin", check=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:  # the DaemonSet controller recorded the new template; the node shows the stale split
        revisions = _kubectl(kubeconfig, "get", "controllerrevisions", "-n", "gpu-operator")["items"]
        updated = any("npa.local/driver-update" in json.dumps(r["data"]) for r in revisions)
        capacity = _kubectl(kubeconfig, "get", "node", nodes[1])["status"]["capacity"]
        if updated and capacity.get("nvidia.com/gpu") == "1":
            break
        assert time.monotonic() < deadline, (updated, capacity)
        time.sleep(0.5)
    before = _driver_pods(kubeconfig)
    generations = _discovery_generations(kubeconfig)
    private = ["--evidence-dir", str(evidence_dir), "--output", "json"]

    # ---- a GPU workload runs: refused, nothing changed (no cordon, no pod deleted, nothing restarted)
    _kubectl(kubeconfig, "apply", "-f", "-", stdin=GPU_POD.replace("NODE", nodes[0]))
    refused = npa("verify-mig", "--spec", spec, "--wait", "--reconcile", "--timeout-minutes", "0.5", *private)
    assert refused.code == 1, refused.stdout[-3000:]
    assert_publishable(refused, evidence_dir)
    [entry] = refused.json()["clusters"]
    assert "1 GPU workload(s)" in entry["error"] and "nothing was changed" in entry["error"]
    assert _driver_pods(kubeconfig) == before and _discovery_generations(kubeconfig) == generations
    assert not any(_kubectl(kubeconfig, "get", "node", n)["spec"].get("unschedulable") for n in nodes)
    assert [s["step"] for s in _receipts(kube_api, context)[-1]["steps"]] == ["refused"]

    # ---- once it is gone: the driver pods replaced one worker at a time, then GFD and the device plugin
    kubectl = str(binaries.find("kubectl"))
    subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig, "delete", "pod", "trainer", "--wait=true"],
        check=True,
        capture_output=True,
    )
    repaired = npa("verify-mig", "--spec", spec, "--wait", "--reconcile", "--timeout-minutes", "3", *private)
    assert repaired.code == 0, repaired.stdout[-3000:] + repaired.stderr[-3000:]
    assert_publishable(repaired, evidence_dir)
    [entry] = repaired.json()["clusters"]
    assert entry["status"] == "ready"
    assert entry["health"]["repairs"]["done"] == {"stale-driver-pod": 1, "stale-resources": 1}
    after = _driver_pods(kubeconfig)
    assert sorted(after) == nodes and all(after[n] != before[n] for n in nodes)  # every stale pod replaced
    assert not any(_kubectl(kubeconfig, "get", "node", n)["spec"].get("unschedulable") for n in nodes)
    assert _kubectl(kubeconfig, "get", "node", nodes[1])["status"]["capacity"]["nvidia.com/gpu"] == "0"
    receipt = _receipts(kube_api, context)[-1]
    steps = [(s["repair"], s["step"], s.get("node") or s.get("daemonset")) for s in receipt["steps"]]
    assert steps == [
        ("stale-driver-pod", "cordon", nodes[0]),
        ("stale-driver-pod", "delete", nodes[0]),
        ("stale-driver-pod", "replaced", nodes[0]),
        ("stale-driver-pod", "restored", nodes[0]),
        ("stale-driver-pod", "cordon", nodes[1]),
        ("stale-driver-pod", "delete", nodes[1]),
        ("stale-driver-pod", "replaced", nodes[1]),
        ("stale-driver-pod", "restored", nodes[1]),
        ("stale-driver-pod", "done", None),
        ("stale-resources", "restart", "gpu-feature-discovery"),
        ("stale-resources", "rolled-out", "gpu-feature-discovery"),
        ("stale-resources", "restart", "nvidia-device-plugin-daemonset"),
        ("stale-resources", "rolled-out", "nvidia-device-plugin-daemonset"),
        ("stale-resources", "done", None),
    ], steps
    deleted = [s for s in receipt["steps"] if s["step"] == "delete"]
    assert [s["uid"] for s in deleted] == [before[n] for n in nodes]  # exactly the identified pods
    assert all(s["prior_unschedulable"] is False for s in receipt["steps"] if s["step"] == "cordon")
    kept = private_evidence(evidence_dir)[f"{context}-verify-mig.json"]["evidence"]
    assert kept["repair_receipt"] and kept["gate_after_repair"]["passed"] is True
    smokes = [v["smoke"] for v in kept["gate_after_repair"]["nodes"].values() if "smoke" in v]
    assert len(smokes) == 2 and all(s["passed"] for s in smokes)  # the full gate: the MIG smoke ran again


@pytest.mark.long
def test_a_recipe_that_ignores_a_pin_is_deployed_mig_not_ready(
    kube_api: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recipe whose GPU operator release installs another MIG Manager than the spec pins (here a copy of
    upstream with one more override file, merged after the fleet's, that sets the chart's version): the
    layout is exact, but the gate reads the operator's ClusterPolicy and DaemonSets, so the cluster is kept
    as `deployed-mig-not-ready` with the mismatch in its evidence (and in `status`)."""
    library = writable_copy(tmp_path / "library")
    (library / "modules" / "gpu-operator" / "zz_ignores_the_pin_override.tf").write_text(
        'resource "nebius_applications_v1alpha1_k8s_release" "this" {\n'
        "  sensitive = {\n"
        '    set     = merge(local.helm_values, var.npa_fleet_values, { "migManager.version" = "v0.14.1" })\n'
        '    version = "ignores-the-pin"\n'
        "  }\n}\n"
    )
    monkeypatch.setenv("NPA_K8S_TRAINING_MIRROR", str(library))
    npa("local-cloud", "init", check=True)
    spec = str(
        write_spec(
            tmp_path / "fleet.yaml",
            SPEC.replace("gpu_health_timeout_minutes: 2", "gpu_health_timeout_minutes: 1"),
        )
    )
    up = npa("up", "--spec", spec, "--yes", "--output", "json")
    assert up.code == 1, up.stderr[-4000:]
    cluster = by_stack(up.json())["migv.project-existing1.mig"]
    assert (cluster["status"], cluster["validation"]) == ("deployed-mig-not-ready", "mig")
    errors = cluster["health"]["last_errors"]
    assert "ClusterPolicy cluster-policy: migManager.version 'v0.14.1', v0.14.2 pinned" in errors, errors
    assert all("igManager" in e or "nvidia-mig-manager" in e for e in errors), errors
    assert cluster["retry_command"] and " up " in cluster["retry_command"]
    status = npa("status", "--spec", spec, "--output", "json")
    assert by_stack(status.json())["migv.project-existing1.mig"]["status"] == "deployed-mig-not-ready"
