"""What the verifiers publish (stdout, JSON) is counts, categories, hashes and pass/fail per node; the exact
evidence (node names, pod names, probe output, error text) stays in the private evidence."""

from __future__ import annotations

import json

from npa_pulumi.output.evidence import name_hash, publish_graphics, publish_mig, publish_storage

NODES = ("computeinstance-e00abc123-ng-cpu-0", "computeinstance-e00def456-ng-gpu-0")


def _storage_evidence(bad: str | None) -> dict[str, object]:
    verdict = {"host_mount": True, "fstab_nofail": True, "capacity": True, "capacity_gib": 64.0}
    nodes = {n: {**verdict, "shared_write": True, "shared_read": True, "probe": "Succeeded"} for n in NODES}
    failures = []
    if bad:
        nodes[bad] = {**nodes[bad], "host_mount": False, "error": f"/mnt/data not mounted on {bad}"}
        failures = [f"{bad}: host mount failed (/mnt/data not mounted on {bad})"]
    return {
        "passed": not bad,
        "run_id": "a1b2c3d4",
        "expected_workers": 2,
        "requested_gibibytes": 64,
        "nodes": nodes,
        "failures": failures,
        "cleanup": {"objects_created": 7, "all_removed": True},
    }


def _published(summary: dict[str, object], error: str | None) -> str:
    return json.dumps(summary) + (error or "")


def test_storage_publishes_counts_categories_and_hashes_only() -> None:
    ok = publish_storage(_storage_evidence(None))
    assert ok.error is None and ok.summary["passed"] is True
    assert (ok.summary["nodes_checked"], ok.summary["nodes_failed"], ok.summary["capacity_gib_ok"]) == (
        2,
        0,
        2,
    )
    broken = publish_storage(_storage_evidence(NODES[0]))
    text = _published(broken.summary, broken.error)
    assert not any(n in text for n in NODES) and "/mnt/data" not in text and "a1b2c3d4" not in text
    assert (
        broken.error
        == "shared storage verification failed: 1 of 2 node(s) failed; categories: host_mount (1)"
    )
    [failed] = [n for n in broken.summary["nodes"] if not n["passed"]]
    assert failed == {"node_sha256": name_hash(NODES[0]), "passed": False, "failed": ["host_mount"]}
    assert broken.summary["cleanup"] == {"objects_created": 7, "all_removed": True}


def test_mig_errors_become_categories_of_hashed_nodes() -> None:
    evidence = {
        "ready": False,
        "snapshots": 3,
        "errors": [
            f"{NODES[1]}: GPU 0 MIG mode Disabled/Enabled (current/pending), Enabled expected",
            "driver pod gpu-operator/nvidia-driver-daemonset-x7k2p is Pending, not ready",
        ],
        "nodes": [NODES[1]],
        "hardware": {NODES[1]: {"errors": ["..."]}},
        "repaired_stale_taint_on": [],
    }
    published = publish_mig(evidence)
    text = _published(published.summary, published.error)
    assert NODES[1] not in text and "x7k2p" not in text
    assert published.summary["failure_categories"] == {"mig-mode": 1, "operator": 1}
    assert published.error == "MIG not ready: 1 of 1 node(s) failed; categories: mig-mode (1), operator (1)"
    workloads = publish_mig(
        {"ready": False, "errors": [], "gpu_workloads": ["default/trainer"], "repaired": []}
    )
    assert workloads.error is not None and "1 GPU workload(s)" in workloads.error
    assert "trainer" not in _published(workloads.summary, workloads.error)


def test_graphics_names_no_worker_and_keeps_partial_evidence_failing() -> None:
    worker = {
        "cuda": {"node": NODES[1], "pod": "npa-cuda-smoke-9f8e", "passed": False, "output_tail": "fail"},
        "graphics": {"node": NODES[1], "pod": "npa-graphics-1a2b", "passed": True, "missing": []},
    }
    broken = publish_graphics({"passed": False, "expected_workers": 1, "workers": {NODES[1]: worker}})
    text = _published(broken.summary, broken.error)
    assert NODES[1] not in text and "9f8e" not in text
    assert broken.summary["failure_categories"] == {"cuda": 1}
    partial = publish_graphics({"passed": False, "expected_workers": 2, "workers": {}})
    assert partial.error == "partial evidence: 0 GPU worker(s) found, 2 expected"
    assert partial.summary["failure_categories"] == {"partial-evidence": 1}


def test_graphics_that_never_stabilized_fails_without_naming_the_node() -> None:
    stable = {
        "passed": False,
        "reason": f"boot ids changed during stabilization ({NODES[1]})",
        "stabilization_s": 30,
    }
    published = publish_graphics(
        {"passed": False, "expected_workers": 1, "workers": {}, "stabilization": stable}
    )
    assert published.error == "not stable for 30s before the probes; the probes did not run"
    assert published.summary["failure_categories"] == {"stabilization": 1}
    stale = (
        "driver pod gpu-operator/nvidia-driver-daemonset-x7k2p runs an older template (a) than its DaemonSet"
    )
    published = publish_graphics(
        {"passed": False, "workers": {}, "stabilization": {**stable, "errors": [stale]}}
    )
    assert published.summary["failure_categories"] == {"stabilization": 1, "stale-driver-pod": 1}
    assert published.error is not None and "(stale-driver-pod (1))" in published.error
    assert "x7k2p" not in _published(published.summary, published.error)
    assert published.summary["stable"] is False and published.summary["stabilization_s"] == 30
    assert NODES[1] not in _published(published.summary, published.error)
