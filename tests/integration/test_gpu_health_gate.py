"""The GPU health gate on the local cloud, with the real engine and real API servers: a healthy GPU cluster
is `deployed` with evidence (every node checked, a CUDA smoke pod per GPU node, none left behind); a smoke
that fails on one node leaves the cluster `deployed-validation-failed`, kept whole, in `status` too; once
the fault is cleared, `up` runs only the gate again (Terraform is not re-applied) and reaches `deployed`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import by_stack, npa, write_spec

from npa_pulumi.simulator.kube import binaries

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: gate
region: us-central1
project_prefix: "gate-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
  gpu_health_stabilization_seconds: STABILIZATION
  gpu_health_timeout_minutes: 2
  gpu_cuda_smoke: true
projects:
  - name: p
    clusters:
      - name: train
        gpu_nodes: {count: 2, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        enable_gpu_cluster: false
"""


def _spec(tmp_path: Path, stabilization: int) -> str:
    return str(write_spec(tmp_path / "fleet.yaml", SPEC.replace("STABILIZATION", str(stabilization))))


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


def test_the_gate_decides_deployed(kube_api: Path, tmp_path: Path) -> None:
    npa("local-cloud", "init", check=True)
    spec = _spec(tmp_path, 2)
    first = npa("up", "--spec", spec, "--yes", "--output", "json")
    assert first.code == 0, first.stderr[-4000:]
    train = by_stack(first.json())["gate.p.train"]
    assert (train["status"], train["validation"]) == ("deployed", "gpu-health")
    health = train["health"]
    assert health["passed"] is True and health["phase"] == "done"
    assert health["stable_after_s"] is not None
    gpu_nodes = sorted(n for n, v in health["nodes"].items() if v.get("gpu"))
    assert len(gpu_nodes) == 2 and len(health["nodes"]) == 3
    for node in gpu_nodes:
        smoke = health["nodes"][node]["smoke"]
        assert smoke["passed"] and smoke["phase"] == "Succeeded" and "Test PASSED" in smoke["output_tail"]
        assert smoke["cleaned_up"] is True
    kubeconfig = train["kubeconfig"]
    leftovers = _kubectl(kubeconfig, "get", "pods", "-A", "-l", "app.kubernetes.io/managed-by=npa-gpu-health")
    assert leftovers["items"] == []

    # ---- a workload fault on one GPU node: the smoke fails there, the cluster is kept, status agrees
    bad = gpu_nodes[0]
    npa(
        "local-cloud",
        "fault",
        "node",
        "--cluster",
        train["cluster_id"],
        "--node",
        bad,
        "--kind",
        "pod-failure",
        check=True,
    )
    failed = npa("up", "--spec", _spec(tmp_path, 3), "--yes", "--output", "json")  # a gate setting changed
    assert failed.code == 1, failed.stderr[-3000:]
    train = by_stack(failed.json())["gate.p.train"]
    assert train["status"] == "deployed-validation-failed"
    assert bad in train["health"]["reason"] and train["health"]["phase"] == "smoke"
    assert train["health"]["nodes"][bad]["smoke"]["exit_code"] == 1
    assert train["retry_command"] and "up" in train["retry_command"]
    status = npa("status", "--spec", spec, "--output", "json")
    assert by_stack(status.json())["gate.p.train"]["status"] == "deployed-validation-failed"
    assert len(_kubectl(kubeconfig, "get", "nodes")["items"]) == 3  # nothing was torn down

    # ---- cleared: `up` re-runs only the gate (same inputs, so Terraform has nothing to do)
    clear = ["local-cloud", "fault", "node", "--cluster", train["cluster_id"], "--node", bad]
    npa(*clear, "--kind", "pod-failure", "--clear", check=True)
    retried = npa("up", "--spec", _spec(tmp_path, 3), "--yes", "--output", "json")
    assert retried.code == 0, retried.stderr[-3000:]
    train = by_stack(retried.json())["gate.p.train"]
    assert train["status"] == "deployed" and train["health"]["passed"] is True
    # the gate and its fabric check (skipped while the gate failed) run again; Terraform does not
    assert train["changes"].get("update", 0) == 2 and train["changes"].get("create", 0) == 0
    assert train["health"]["fabric"]["status"] == "passed"  # 2 x 8-GPU H200: NVLink measured on both
