"""Lifecycle states end to end on the local cloud, with the real engine, Terraform and API servers: while an
`up` runs, `status` from another process shows `provisioning`, then `validating-gpu-health` while the
health gate stabilizes, then `deployed`; `verify-storage` passes on the deployed cluster and fails closed
on a worker whose shared filesystem is not mounted, leaving no probe object; a destroy that fails in the
cloud leaves `destroy-incomplete` (with the reason and the retry command) in `status`, also as a fresh
machine with the same backend and passphrase sees it, until a destroy succeeds."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import CLI, REPO, assert_publishable, by_stack, npa, private_evidence, write_spec
from s3_support import S3Server

from npa_pulumi.simulator.kube import binaries, shapes
from npa_pulumi.simulator.simulator import LocalSimulator

pytestmark = pytest.mark.integration

STACK = "life.p.train"
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: life
region: us-central1
project_prefix: "life-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: true
  filestore_disk_size_gibibytes: 64
  gpu_health_stabilization_seconds: 12
  gpu_health_timeout_minutes: 3
  gpu_cuda_smoke: true
projects:
  - name: p
    clusters:
      - name: train
        gpu_nodes: {count: 1, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        enable_gpu_cluster: false
"""


def _status(spec: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    shown = npa("status", "--spec", spec, "--output", "json", env=env)
    assert shown.code in (0, 1), shown.stderr[-3000:]
    return by_stack(shown.json())[STACK]


def _kubectl(kubeconfig: str, *args: str) -> Any:
    kubectl = binaries.find("kubectl")
    assert kubectl is not None
    out = subprocess.run(
        [str(kubectl), "--kubeconfig", kubeconfig, *args, "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def test_states_during_up_storage_and_an_incomplete_destroy(kube_api: Path, tmp_path: Path) -> None:
    npa("local-cloud", "init", check=True)
    spec = str(write_spec(tmp_path / "fleet.yaml", SPEC))
    code, watched = _watch_up_stacks(spec, [STACK], tmp_path / "up.log", [], lambda _states: None)
    assert code == 0, (tmp_path / "up.log").read_text()[-4000:]
    seen = watched[STACK]
    assert "provisioning" in seen and "validating-gpu-health" in seen, seen
    assert seen.index("provisioning") < seen.index("validating-gpu-health"), seen
    assert "deployed" not in seen[: seen.index("validating-gpu-health")], seen
    done = _status(spec)
    assert (done["status"], done["validation"]) == ("deployed", "gpu-health")

    # ---- the shared filesystem: healthy, then broken on one worker (fails closed), no probe left either way;
    # what the CLI prints is publishable: the exact per-node evidence is only in the evidence dir
    evidence_dir = tmp_path / "evidence"
    verify = ["verify-storage", "--spec", spec, "--timeout-minutes", "2", "--evidence-dir", str(evidence_dir)]
    storage = npa(*verify, "--output", "json")
    assert storage.code == 0, storage.stdout[-3000:] + storage.stderr[-2000:]
    assert_publishable(storage, evidence_dir)
    [entry] = storage.json()["clusters"]
    assert (entry["status"], entry["validation"]) == ("ready", "storage")
    published = entry["health"]
    assert (published["nodes_checked"], published["nodes_failed"], published["passed"]) == (2, 0, True)
    assert published["requested_gibibytes"] == 64 and published["capacity_gib_ok"] == 2
    assert entry["cluster_id"] is None and published["cluster_id_sha256"]
    [receipt] = private_evidence(evidence_dir).values()
    [receipt_file] = evidence_dir.glob("*-verify-storage.json")
    assert published["evidence_sha256"] == hashlib.sha256(receipt_file.read_bytes()).hexdigest()
    nodes = receipt["evidence"]["nodes"]
    assert len(nodes) == 2 and all(
        v["host_mount"] and v["shared_read"] and v["capacity"] for v in nodes.values()
    )
    assert receipt["evidence"]["requested_gibibytes"] == 64 and all(
        v["capacity_gib"] == 64 for v in nodes.values()
    )
    bad = sorted(nodes)[0]
    fault = ["local-cloud", "fault", "node", "--cluster", receipt["cluster_id"], "--node", bad]
    npa(*fault, "--kind", "storage-unavailable", check=True)
    broken = npa(*verify, "--output", "json")
    broken_text = npa(*verify)
    npa(*fault, "--kind", "storage-unavailable", "--clear", check=True)
    assert broken.code == 1 and broken_text.code == 1
    assert_publishable(broken, evidence_dir)
    assert_publishable(broken_text, evidence_dir)
    [entry] = broken.json()["clusters"]
    assert entry["status"] == "not-ready" and "1 of 2 node(s) failed" in entry["error"], entry["error"]
    assert entry["health"]["failure_categories"]["host_mount"] == 1
    [failed] = [n["failed"] for n in entry["health"]["nodes"] if not n["passed"]]
    assert "host_mount" in failed, failed  # with the checks that follow from it (capacity, host I/O, ...)
    [receipt] = private_evidence(evidence_dir).values()
    assert bad in receipt["error"]
    assert (
        not receipt["evidence"]["nodes"][bad]["host_mount"] and receipt["evidence"]["cleanup"]["all_removed"]
    )
    assert entry["health"]["cleanup"]["all_removed"]
    kubeconfig = done["kubeconfig"] if done.get("kubeconfig") else _kubeconfig(spec, tmp_path)
    label = "npa.nebius.com/storage-verification"
    assert _kubectl(kubeconfig, "get", "pods,pvc", "-A", "-l", label)["items"] == []
    assert _kubectl(kubeconfig, "get", "pv")["items"] == []

    # ---- a destroy that fails in the cloud: destroy-incomplete, with the reason and how to retry
    npa(
        "local-cloud",
        "fault",
        "add",
        "--op",
        "delete_cluster",
        "--error",
        "unavailable",
        "--forever",
        check=True,
    )
    failed = npa("destroy", "--spec", spec, "--yes", "--output", "json")
    assert failed.code == 2 and failed.json()["outcome"] == "partial-cleanup"  # something is left
    assert by_stack(failed.json())[STACK]["status"] == "destroy-incomplete"
    incomplete = _status(spec)
    assert incomplete["status"] == "destroy-incomplete" and incomplete["error"]
    assert incomplete["retry_command"].startswith(f"npa-pulumi destroy --spec {spec}")
    # a fresh machine (another home) with the same backend and passphrase sees the same
    home = Path(os.environ["NPA_PULUMI_HOME"])
    fresh = tmp_path / "fresh"
    fresh_env = {
        "HOME": str(fresh),
        "NPA_PULUMI_HOME": str(fresh / ".npa-pulumi"),
        "PULUMI_HOME": str(fresh / ".pulumi"),
        "PULUMI_BACKEND_URL": f"file://{home / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE_FILE": str(home / "passphrase"),
    }
    assert _status(spec, fresh_env)["status"] == "destroy-incomplete"

    npa("local-cloud", "fault", "clear", check=True)
    retried = npa(*incomplete["retry_command"].split()[1:], "--output", "json")
    assert retried.code == 0, retried.stderr[-3000:]
    assert _status(spec)["status"] == "absent"


def _kubeconfig(spec: str, tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    npa("kubeconfig", "--spec", spec, "--merge-into", str(path), check=True)
    return str(path)


STAGES_SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: stages
region: us-central1
defaults:
  k8s_version: "1.34"
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_gpu_cluster: false
  enable_filestore: false
  gpu_health_timeout_minutes: 3
projects:
  - project_id: project-existing1
    clusters:
      - name: mig
        gpu_nodes:
          count: 2
          platform: gpu-rtx6000
          preset: 1gpu-24vcpu-218gb
          disk_size_gib: 128
          capacity_block_group: capacityblockgroup-local1
        gpu_health_stabilization_seconds: 8
        mig: {enabled: true, strategy: mixed, config: all-balanced}
      - name: basics
"""
PROJECT = "project-existing1"
MIG, BASICS = f"stages.{PROJECT}.mig", f"stages.{PROJECT}.basics"


@pytest.mark.long
def test_mig_and_cpu_only_clusters_pass_their_validating_states_on_an_s3_backend(
    kube_api: Path, tmp_path: Path, s3_backend: tuple[S3Server, str, str]
) -> None:
    """The other two validating states, recorded in an S3 backend (SeaweedFS) and read by `status` from
    other processes: a MIG cluster is `validating-mig` while its layout stabilizes and nvidia-smi is read;
    a CPU-only cluster whose node is NotReady stays `validating-cluster-basics` until the node is Ready,
    then both are `deployed`. Then `verify-mig` reads nvidia-smi on every node and fails closed on a GPU
    whose MIG mode was reset, leaving no probe pod."""
    _server, _bucket, backend = s3_backend
    passphrase = tmp_path / "passphrase"
    passphrase.write_text("stages-" + os.urandom(8).hex())
    passphrase.chmod(0o600)
    common = ["--backend", backend, "--passphrase-file", str(passphrase)]
    npa("local-cloud", "init", check=True)
    spec = str(write_spec(tmp_path / "fleet.yaml", STAGES_SPEC))
    sim = LocalSimulator(kube_api / ".npa-pulumi" / "local-cloud", auto_init=False)
    held: dict[str, str] = {}  # the CPU-only cluster's node, NotReady from its start until seen validating

    def hold_basics(states: dict[str, str]) -> None:
        if not held:
            cluster = next((c for c in sim.list_clusters(PROJECT) if c["name"] == "basics"), None)
            found = sim.cluster_snapshot(cluster["id"]) if cluster is not None else None
            if cluster is not None and found is not None:
                names = [n for g in found[1] for n in shapes.node_names(g)]
                if names:
                    sim.set_node_fault(cluster["id"], names[0], "not_ready")
                    held.update(cluster=cluster["id"], node=names[0])
        elif states.get(BASICS) == "validating-cluster-basics" and "released" not in held:
            sim.set_node_fault(held["cluster"], held["node"], "not_ready", active=False)
            held["released"] = "yes"

    code, seen = _watch_up_stacks(spec, [MIG, BASICS], tmp_path / "up.log", common, hold_basics)
    assert code == 0, (tmp_path / "up.log").read_text()[-4000:]
    assert held.get("released") == "yes", (held, seen)
    for stack, validating in ((MIG, "validating-mig"), (BASICS, "validating-cluster-basics")):
        states = seen[stack]
        assert validating in states, seen
        assert "deployed" not in states[: states.index(validating)], seen
        if "provisioning" in states:
            assert states.index("provisioning") < states.index(validating), seen
    shown = by_stack(npa("status", "--spec", spec, *common, "--output", "json", check=True).json())
    assert (shown[MIG]["status"], shown[MIG]["validation"]) == ("deployed", "mig")
    assert (shown[BASICS]["status"], shown[BASICS]["validation"]) == ("deployed", "cluster-basics")
    gate_nodes = shown[MIG]["health"]["nodes"]
    hardware = {n: v["mig_hardware"] for n, v in gate_nodes.items() if v.get("gpu")}
    assert len(hardware) == 2 and all(
        h["errors"] == [] and len(h["mig_uuids"]) == 3 for h in hardware.values()
    )

    # ---- verify-mig reads nvidia-smi too; a GPU whose MIG mode was reset fails closed on its node only;
    # its output names no node: those are only in the evidence dir
    evidence_dir = tmp_path / "mig-evidence"
    verify = ["verify-mig", "--spec", spec, *common, "--only-clusters", "mig", "--output", "json"]
    verify += ["--evidence-dir", str(evidence_dir)]
    ready = npa(*verify)
    assert ready.code == 0, ready.stdout[-3000:] + ready.stderr[-2000:]
    assert_publishable(ready, evidence_dir)
    [entry] = ready.json()["clusters"]
    assert entry["health"]["nodes_checked"] == 2 and entry["health"]["passed"]
    [receipt] = private_evidence(evidence_dir).values()
    assert sorted(receipt["evidence"]["hardware"]) == sorted(hardware)
    bad = sorted(hardware)[0]
    fault = ["local-cloud", "fault", "node", "--cluster", shown[MIG]["cluster_id"], "--node", bad]
    npa(*fault, "--kind", "mig-disabled", check=True)
    broken = npa(*verify)
    npa(*fault, "--kind", "mig-disabled", "--clear", check=True)
    assert broken.code == 1, broken.stdout[-3000:]
    assert_publishable(broken, evidence_dir)
    [entry] = broken.json()["clusters"]
    assert entry["status"] == "not-ready" and "mig-mode" in entry["error"], entry["error"]
    [failed] = [n["failed"] for n in entry["health"]["nodes"] if not n["passed"]]  # that node only
    assert "mig-mode" in failed, failed  # (its MIG devices go with the mode)
    [receipt] = private_evidence(evidence_dir).values()
    assert "MIG mode Disabled/Enabled" in receipt["error"], receipt["error"]
    assert all(bad in e for e in receipt["evidence"]["errors"]), receipt["evidence"]["errors"]
    label = "npa.nebius.com/smoke=mig-hardware"
    kubeconfig = tmp_path / "kubeconfig"
    npa(
        "kubeconfig",
        "--spec",
        spec,
        *common,
        "--only-clusters",
        "mig",
        "--merge-into",
        str(kubeconfig),
        check=True,
    )
    probes = _kubectl(str(kubeconfig), "get", "pods", "-A", "-l", label)
    assert probes["items"] == []


def _watch_up_stacks(
    spec: str,
    stacks: list[str],
    log: Path,
    extra: list[str],
    on_states: Callable[[dict[str, str]], None],
) -> tuple[int, dict[str, list[str]]]:
    """`up` in the background; `status` polled from other processes until it ends: each stack's states."""
    with log.open("w") as stderr:
        up = subprocess.Popen(
            [*CLI, "up", "--spec", spec, *extra, "--yes", "--output", "json"],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=REPO,
            env=dict(os.environ),
        )
        seen: dict[str, list[str]] = {stack: [] for stack in stacks}
        try:
            while up.poll() is None:
                shown = npa("status", "--spec", spec, *extra, "--output", "json")
                states = {s: c["status"] for s, c in by_stack(shown.json()).items() if s in seen}
                for stack, state in states.items():
                    if not seen[stack] or seen[stack][-1] != state:
                        seen[stack].append(state)
                on_states(states)
                time.sleep(0.3)
        finally:
            if up.poll() is None:
                up.kill()
            up.wait(timeout=60)
    return up.returncode, seen
