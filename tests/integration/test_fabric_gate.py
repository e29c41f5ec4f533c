"""The fabric check on the local cloud, with the real engine and real API servers: `up` of a 4-node
H200 cluster on an InfiniBand fabric measures NCCL bandwidth on each node and across all of them, and
records it in the stack's `health_evidence`; a degraded NVLink on one node makes `verify-fabric` and a fresh
`up`'s gate name that node (the cluster is kept); an InfiniBand port down on one node fails the inter-node
check and the culprit search names it by its loopback; a slow link from one node to the fabric (its
loopback fine) is found by bisection in at most ceil(log2 4) + 1 rounds, by `verify-fabric` and by the
gate; a single-GPU cluster records the check as `not-applicable`. A node replaced by auto-repair is
requalified with the fabric check run again: with a slow link of its own it stays unqualified, named by the
check; cleared, it qualifies. One fleet is deployed; every step reads it."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import by_stack, npa, write_spec

from npa_pulumi.simulator.kube import binaries

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: fab
region: us-central1
project_prefix: "fab-"
defaults:
  enable_filestore: false
  gpu_health_stabilization_seconds: 1
  gpu_health_timeout_minutes: 5
projects:
  - name: p
    clusters:
      - name: train
        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
        gpu_nodes: {count: 4, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        enable_gpu_cluster: true
        infiniband_fabric: fabric-local
        gpu_fabric_check: {timeout_minutes: TIMEOUT}
      - name: solo
        gpu_nodes: {count: 1, platform: gpu-h200-sxm, preset: 1gpu-16vcpu-200gb}
"""


def _spec(tmp_path: Path, timeout_minutes: int = 4) -> str:
    text = SPEC.replace("TIMEOUT", str(timeout_minutes))
    return str(write_spec(tmp_path / f"fleet-{timeout_minutes}.yaml", text))


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


def _verify(spec: str, evidence: Path) -> tuple[int, dict[str, Any]]:
    result = npa(
        "verify-fabric", "--spec", spec, "--only-clusters", "train", "--evidence-dir", str(evidence),
        "--output", "json",
    )  # fmt: skip
    return result.code, by_stack(result.json())["fab.p.train"]


def test_fabric_bandwidth_in_the_gate_and_verify_fabric(kube_api: Path, tmp_path: Path) -> None:
    npa("local-cloud", "init", check=True)
    spec = _spec(tmp_path)
    first = npa("up", "--spec", spec, "--only-clusters", "train", "--yes", "--output", "json")
    assert first.code == 0, first.stderr[-4000:]
    train = by_stack(first.json())["fab.p.train"]
    assert train["status"] == "deployed", train
    fabric = train["health"]["fabric"]
    assert fabric["status"] == "passed" and fabric["passed"] is True, fabric
    assert fabric["thresholds"]["intra_node_busbw_gbps"] == 420.0
    assert fabric["thresholds"]["inter_node_busbw_gbps"] == 360.0
    assert "soperator" in fabric["thresholds"]["source"]
    assert fabric["images"]["intra_node"].startswith("cr.eu-north1.nebius.cloud/nebius-benchmarks/nccl-tests")
    nodes = sorted(fabric["nodes"])
    assert len(nodes) == 4
    for node in nodes:
        report = fabric["nodes"][node]
        assert report["passed"] and report["busbw_gbps"] >= 420, report
        assert len(report["result"]["rows"]) == 5 and report["cleaned_up"] is True  # 512M .. 8G
    inter = fabric["inter_node"]
    assert inter["status"] == "passed" and inter["busbw_gbps"] >= 360 and sorted(inter["nodes"]) == nodes
    assert inter["result"]["ranks"] == 32 and inter["result"]["largest_size_bytes"] == 8 << 30
    # the stack's own output holds the same evidence
    status = by_stack(npa("status", "--spec", spec, "--output", "json", check=True).json())
    assert status["fab.p.train"]["health"]["fabric"]["nodes"][nodes[0]]["busbw_gbps"] >= 420
    kubeconfig = train["kubeconfig"]
    probes = _kubectl(
        kubeconfig, "get", "pods,services", "-A", "-l", "app.kubernetes.io/managed-by=npa-gpu-health"
    )
    assert probes["items"] == []

    # ---- a single-GPU cluster: nothing to measure, and it says so
    code, solo = _verify_solo(spec, tmp_path / "evidence")
    assert code == 0 and solo["status"] == "skipped", solo
    assert solo["health"]["status"] == "not-applicable" and "no multi-GPU NVLink" in solo["health"]["reason"]

    fault = ["local-cloud", "fault", "node", "--cluster", train["cluster_id"]]
    slow, other, *_ = nodes
    # ---- a degraded NVLink on one node: verify-fabric names it ...
    npa(*fault, "--node", slow, "--kind", "nvlink-degraded", check=True)
    code, entry = _verify(spec, tmp_path / "evidence")
    assert code == 1 and entry["status"] == "not-ready", entry
    # stdout is publishable: the slow node by its hash only; its name is in the evidence file
    assert slow not in json.dumps(entry) and entry["health"]["slow_nodes_sha256"] == [_sha(slow)]
    assert entry["health"]["failure_categories"] == {"intra-node-bandwidth": 1}
    private = _evidence(tmp_path / "evidence", train["kube_context"])
    assert private["evidence"]["slow_nodes"] == [slow] and slow in private["error"]
    assert other not in private["error"]
    found = private["evidence"]["nodes"]
    assert found[slow]["busbw_gbps"] < 420 <= found[other]["busbw_gbps"]
    # ... and so does the gate of a fresh up (a fabric setting changed: only the check runs again)
    failed = npa("up", "--spec", _spec(tmp_path, 3), "--only-clusters", "train", "--yes", "--output", "json")
    assert failed.code == 1, failed.stderr[-3000:]
    train = by_stack(failed.json())["fab.p.train"]
    assert train["status"] == "deployed-validation-failed", train
    assert train["health"]["phase"] == "fabric" and slow in train["health"]["reason"]
    assert train["health"]["fabric"]["slow_nodes"] == [slow]
    assert train["changes"].get("update", 0) == 1  # the fabric check alone; Terraform untouched
    assert len(_kubectl(kubeconfig, "get", "nodes")["items"]) == 5  # nothing was torn down
    npa(*fault, "--node", slow, "--kind", "nvlink-degraded", "--clear", check=True)
    code, entry = _verify(spec, tmp_path / "evidence")
    assert code == 0 and entry["status"] == "ready", entry

    # ---- an InfiniBand port down on one node: the inter-node check fails, the culprit search names it
    npa(*fault, "--node", other, "--kind", "ib-port-down", check=True)
    code, entry = _verify(spec, tmp_path / "evidence")
    assert code == 1, entry
    assert entry["health"]["inter_node"]["culprits_sha256"] == [_sha(other)] and other not in json.dumps(
        entry
    )
    private = _evidence(tmp_path / "evidence", train["kube_context"])["evidence"]
    inter = private["inter_node"]
    assert inter["status"] == "failed" and inter["busbw_gbps"] < 360, inter
    assert inter["culprits"] == [other] and private["slow_nodes"] == [other]
    assert all(r["passed"] for r in private["nodes"].values())  # NVLink is fine on both
    assert {tuple(s["nodes"]) for s in inter["search"]} == {(n,) for n in nodes}  # one loopback round
    npa(*fault, "--node", other, "--kind", "ib-port-down", "--clear", check=True)

    # ---- a slow link from one node to the fabric: every loopback passes; bisection names the node
    linked = nodes[2]
    npa(*fault, "--node", linked, "--kind", "ib-link-degraded", check=True)
    code, entry = _verify(spec, tmp_path / "evidence")
    assert code == 1, entry
    inter = _evidence(tmp_path / "evidence", train["kube_context"])["evidence"]["inter_node"]
    assert inter["culprits"] == [linked], inter
    assert inter["rounds"] <= 3 and {s["step"] for s in inter["search"]} == {"loopback", "halving", "pairing"}
    assert all(s["busbw_gbps"] is not None for s in inter["search"])  # every round's figures
    gated = npa("up", "--spec", _spec(tmp_path, 2), "--only-clusters", "train", "--yes", "--output", "json")
    assert gated.code == 1, gated.stderr[-3000:]
    train = by_stack(gated.json())["fab.p.train"]
    assert train["status"] == "deployed-validation-failed" and linked in train["health"]["reason"], train
    npa(*fault, "--node", linked, "--kind", "ib-link-degraded", "--clear", check=True)
    retried = npa("up", "--spec", _spec(tmp_path, 3), "--only-clusters", "train", "--yes", "--output", "json")
    assert retried.code == 0, retried.stderr[-3000:]
    assert by_stack(retried.json())["fab.p.train"]["status"] == "deployed"

    # ---- a node replaced by auto-repair: requalification runs the fabric check again
    npa(*fault, "--node", nodes[3], "--kind", "replace", check=True)
    newcomer = _newcomer(spec, nodes)
    npa(*fault, "--node", newcomer, "--kind", "ib-link-degraded", check=True)
    code, requalified = _requalify(spec)
    done = requalified["requalify"]
    assert done["nodes"] == [newcomer] and done["failed"] == [newcomer], done
    assert done["fabric"]["status"] == "failed" and newcomer in done["fabric"]["culprits"], done["fabric"]
    node = next(n for n in requalified["nodes"] if n["name"] == newcomer)
    assert node["qualification"] == "unqualified" and "fabric check" in node["requalification"]["errors"][0]
    npa(*fault, "--node", newcomer, "--kind", "ib-link-degraded", "--clear", check=True)
    code, requalified = _requalify(spec)
    assert code == 0 and requalified["requalify"]["passed"] == [newcomer], requalified["requalify"]
    assert requalified["requalify"]["fabric"]["status"] == "passed"
    node = next(n for n in requalified["nodes"] if n["name"] == newcomer)
    assert node["qualification"] == "requalified" and node["state"] == "usable"
    assert node["requalification"]["probes"]["fabric"]["passed"] is True


def _health(spec: str, *extra: str) -> tuple[int, dict[str, Any]]:
    result = npa("health", "--spec", spec, "--only-clusters", "train", "--output", "json", *extra)
    assert result.code in (0, 1), result.stderr[-3000:]
    [cluster] = result.json()["clusters"]
    return result.code, cluster


def _requalify(spec: str) -> tuple[int, dict[str, Any]]:
    return _health(spec, "--requalify", "--yes")


def _newcomer(spec: str, before: list[str]) -> str:
    """The GPU node that joined in the replaced one's place, once it is Ready."""
    deadline = time.monotonic() + 120
    while True:
        _, cluster = _health(spec)
        gpu: dict[str, Any] = {str(n["name"]): n for n in cluster["nodes"] if n["gpu"]}
        joined = sorted(set(gpu) - set(before))
        if joined and gpu[joined[0]]["ready"] and len(gpu) == len(before):
            return joined[0]
        assert time.monotonic() < deadline, cluster
        time.sleep(2)


def _sha(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def _evidence(directory: Path, context: str) -> dict[str, Any]:
    """The exact evidence verify-fabric kept in --evidence-dir (never on stdout)."""
    document: dict[str, Any] = json.loads((directory / f"{context}-verify-fabric.json").read_text())
    return document


def _verify_solo(spec: str, evidence: Path) -> tuple[int, dict[str, Any]]:
    result = npa(
        "verify-fabric", "--spec", spec, "--only-clusters", "solo", "--evidence-dir", str(evidence),
        "--output", "json",
    )  # fmt: skip
    return result.code, by_stack(result.json())["fab.p.solo"]
