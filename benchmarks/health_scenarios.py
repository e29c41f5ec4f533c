"""Issue 46's benchmarks, on the embedded local cloud with real Kubernetes API servers:

* `fleet_health`: `health --output json` of 8 deployed clusters with 30 nodes in all (2 projects) as a
  whole process, its wall time and CPU; the local cloud's API calls it makes, counted by operation
  (`$NPA_LOCAL_CLOUD_CALL_LOG`), to show its reads are batched per project and per cluster, never per node;
  and what one `--watch` iteration costs: the CPU of `--watch --iterations 4` less that of
  `--iterations 1` (the same process start, imports and first read), per extra iteration, against the 60 s
  a default `--interval` leaves between reads;
* `fabric_bisection`: the fabric culprit search over 16 GPU nodes: `verify-fabric` of a 16-node H200 cluster
  on `fabric-local` with one node's link to the fabric slowed (`ib-link-degraded`; its loopback is fine),
  the rounds the search took from its evidence, and the same search (`bisect_culprits`) over the
  bandwidth model for every one of the 16 nodes being the slow one, and for every adjacent pair's link.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.fixtures import PROJECT, roomy_tenant
from benchmarks.harness import Home, RunFailed, median, stats

CLUSTERS, NODES = 8, 30
_HEALTH_SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: hb
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
  gpu_health_stabilization_seconds: 1
  gpu_health_timeout_minutes: 5
projects:
  - project_id: PROJECT
    clusters: [CLUSTERS_A]
  - name: hb-p001
    clusters: [CLUSTERS_B]
"""
# Six clusters of 1 CPU + 3 GPU nodes and two of 1 CPU + 2 GPU nodes: 30 nodes.
_GPU_NODES = (3, 3, 3, 3, 3, 3, 2, 2)
WATCH_INTERVAL_S = 60.0


def _health_spec() -> str:
    clusters = [
        f"{{name: c{i}, gpu_nodes: {{count: {n}, platform: gpu-h200-sxm, preset: 1gpu-16vcpu-200gb}}, "
        "enable_gpu_cluster: false}"
        for i, n in enumerate(_GPU_NODES)
    ]
    return (
        _HEALTH_SPEC.replace("PROJECT", PROJECT)
        .replace("CLUSTERS_A", ", ".join(clusters[:4]))
        .replace("CLUSTERS_B", ", ".join(clusters[4:]))
    )


def _calls(path: Path) -> Counter[str]:
    return Counter(line.strip() for line in path.read_text().splitlines() if line.strip())


@contextlib.contextmanager
def _local_cloud(work: Path, name: str) -> Iterator[Home]:
    """A fresh home with a local cloud whose clusters run API servers; reset (every API server of it
    stopped) and removed however the scenario ends."""
    home = Home.fresh(work / name)
    home.extra["NPA_LOCAL_CLOUD_KUBERNETES_API"] = "1"
    try:
        tenant = roomy_tenant(work / "tenant.yaml")
        home.npa("local-cloud", "init", "--force", "--tenant-fixture", str(tenant))
        home.npa("local-cloud", "set", "provisioning-seconds", "0")
        yield home
    finally:
        home.npa("local-cloud", "reset", "--yes", check=False)
        shutil.rmtree(home.root, ignore_errors=True)


def fleet_health(work: Path, budget: Any) -> dict[str, Any]:
    with _local_cloud(work, "fleet") as home:
        reads, calls, watch = _measure_health(home, budget)
    wall = median([r["wall_s"] for r in reads])
    # Batched: no operation is called more often than there are clusters (a per-node read of 30 nodes
    # would be), and the project-wide ones once per project.
    batched = max(calls.values(), default=0) <= CLUSTERS and calls.get("list_active_maintenance", 0) <= 2
    per_iteration = watch["cpu_s_per_iteration"]
    share = per_iteration / WATCH_INTERVAL_S
    return {
        "name": "fleet health read",
        "target": f"health of {CLUSTERS} clusters ({NODES} nodes) <= 5 s wall; reads batched per project "
        "and cluster; a --watch iteration <= 10% of one core at a 60 s interval",
        "clusters": CLUSTERS,
        "nodes": NODES,
        "reads": reads,
        "wall_s": stats([r["wall_s"] for r in reads]),
        "cpu_s": stats([r["cpu_s"] for r in reads]),
        "cloud_calls": dict(sorted(calls.items())),
        "cloud_calls_total": sum(calls.values()),
        "batched": batched,
        "watch": watch,
        "watch_core_share": round(share, 4),
        "targets_met": {"wall": wall <= 5.0, "batched": batched, "watch": share <= 0.10},
        "met": wall <= 5.0 and batched and share <= 0.10,
    }


def _measure_health(home: Home, budget: Any) -> tuple[list[dict[str, Any]], Counter[str], dict[str, Any]]:
    spec = home.root / "fleet.yaml"
    spec.write_text(_health_spec())
    deployed = home.npa_document("up", "--spec", str(spec), "--yes", "-j", "4", "--output", "json")[1]
    clusters = [c for c in deployed.get("clusters", []) if c.get("status") == "deployed"]
    if len(clusters) != CLUSTERS:
        raise RunFailed(f"{len(clusters)} of {CLUSTERS} clusters deployed")
    reads, calls = [], Counter[str]()
    log = home.root / "calls.log"
    for repeat in range(max(3, budget.repeats)):
        log.unlink(missing_ok=True)
        home.extra["NPA_LOCAL_CLOUD_CALL_LOG"] = str(log) if repeat == 0 else ""
        sample, document = home.npa_document("health", "--spec", str(spec), "--output", "json")
        nodes = sum(len(c.get("nodes") or []) for c in document.get("clusters", []))
        if nodes != NODES or document.get("totals", {}).get("usable") != sum(_GPU_NODES):
            raise RunFailed(f"health read {nodes} nodes, totals {document.get('totals')}")
        reads.append(sample.brief())
        if repeat == 0:
            calls = _calls(log)
    home.extra["NPA_LOCAL_CLOUD_CALL_LOG"] = ""
    return reads, calls, _watch_costs(home, spec, max(2, budget.repeats - 1))


def _watch_costs(home: Home, spec: Path, repeats: int) -> dict[str, Any]:
    """CPU of `--watch --iterations 4` less that of `--iterations 1` (interleaved), per extra iteration."""
    one: list[float] = []
    four: list[float] = []
    for _ in range(repeats):
        for iterations, into in ((1, one), (4, four)):
            sample = home.npa(
                "health", "--spec", str(spec), "--watch", "--interval", "1s", "--iterations", str(iterations),
                "--output", "json",
            )  # fmt: skip
            into.append(sample.cpu_s)
    extra = (median(four) - median(one)) / 3
    return {
        "cpu_s_one_iteration_process": stats(one),
        "cpu_s_four_iterations_process": stats(four),
        "cpu_s_per_iteration": round(max(0.0, extra), 3),
        "interval_s": WATCH_INTERVAL_S,
    }


# ------------------------------------------------------------------------------------ fabric bisection

FABRIC_NODES = 16
_FABRIC_SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: bisect
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
  gpu_health_stabilization_seconds: 1
  gpu_health_timeout_minutes: 10
projects:
  - project_id: PROJECT
    clusters:
      - name: c0
        gpu_nodes: {count: NODES, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        enable_gpu_cluster: true
        infiniband_fabric: fabric-local
        gpu_fabric_check: {timeout_minutes: 10}
"""


def _model(slow: set[str], slow_links: set[frozenset[str]]) -> Callable[[list[list[str]], bool], list[Any]]:
    """The local cloud's bandwidth model (npa_pulumi/simulator/kube/fabric.py): an all-reduce across nodes
    is slow when one of them has a slow link to the fabric, or when it spans a slow link between two of
    them; a loopback never is (the fault is on the link, not the node's own ports)."""

    def measure(groups: list[list[str]], loopback: bool) -> list[Any]:
        reports = []
        for group in groups:
            members = set(group)
            bad = not loopback and (bool(members & slow) or any(link <= members for link in slow_links))
            reports.append({"nodes": group, "passed": not bad, "busbw_gbps": 197.5 if bad else 395.0})
        return reports

    return measure


def _model_rounds() -> dict[str, Any]:
    from npa_pulumi.kube.fabric_check import bisect_culprits

    nodes = [f"gpu-{i:02d}" for i in range(FABRIC_NODES)]
    by_node, by_link = {}, {}
    for node in nodes:
        culprits, search = bisect_culprits(nodes, _model({node}, set()), lambda: True)
        if culprits != [node]:
            raise RunFailed(f"the search named {culprits} for a slow {node}")
        by_node[node] = max(entry["round"] for entry in search)
    for a, b in itertools.pairwise(nodes):
        culprits, search = bisect_culprits(nodes, _model(set(), {frozenset((a, b))}), lambda: True)
        if not any(a in c and b in c for c in culprits):
            raise RunFailed(f"the search named {culprits} for a slow link {a} <-> {b}")
        by_link[f"{a} <-> {b}"] = max(entry["round"] for entry in search)
    return {
        "rounds_by_slow_node": by_node,
        "rounds_by_slow_link": by_link,
        "max_rounds": max([*by_node.values(), *by_link.values()]),
    }


def fabric_bisection(work: Path, budget: Any) -> dict[str, Any]:
    model = _model_rounds()
    # verify-fabric keeps its exact evidence outside any git work tree (it refuses one inside).
    evidence_dir = Path(tempfile.mkdtemp(prefix="npa-bench-evidence-"))
    try:
        with _local_cloud(work, "fabric") as home:
            runs = _measure_bisection(home, budget, evidence_dir)
    finally:
        shutil.rmtree(evidence_dir, ignore_errors=True)
    bound = math.ceil(math.log2(FABRIC_NODES)) + 1
    worst = max([model["max_rounds"], *(r["rounds"] for r in runs)])
    return {
        "name": "fabric culprit search",
        "target": f"a bisection over {FABRIC_NODES} fabric nodes finishes in <= {bound} rounds",
        "nodes": FABRIC_NODES,
        "local_cloud_runs": runs,
        "verify_fabric_wall_s": stats([r["wall_s"] for r in runs]),
        "model": model,
        "max_rounds": worst,
        "met": worst <= bound,
    }


def _measure_bisection(home: Home, budget: Any, evidence_dir: Path) -> list[dict[str, Any]]:
    spec = home.root / "fleet.yaml"
    spec.write_text(_FABRIC_SPEC.replace("PROJECT", PROJECT).replace("NODES", str(FABRIC_NODES)))
    deployed = home.npa_document("up", "--spec", str(spec), "--yes", "--output", "json")[1]
    [cluster] = deployed.get("clusters") or [{}]
    fabric = (cluster.get("health") or {}).get("fabric") or {}
    if cluster.get("status") != "deployed" or fabric.get("status") != "passed":
        raise RunFailed(
            f"the 16-node cluster did not deploy with a passed fabric check: {fabric.get('reason')}"
        )
    nodes = sorted(fabric.get("nodes") or {})
    runs = []
    for repeat in range(max(2, budget.repeats - 1)):
        slow = nodes[(5 + 7 * repeat) % len(nodes)]
        fault = ["local-cloud", "fault", "node", "--cluster", str(cluster["cluster_id"]), "--node", slow]
        home.npa(*fault, "--kind", "ib-link-degraded")
        sample = home.npa(
            "verify-fabric", "--spec", str(spec), "--evidence-dir", str(evidence_dir), "--output", "json",
            check=False,
        )  # fmt: skip
        home.npa(*fault, "--kind", "ib-link-degraded", "--clear")
        kept_path = evidence_dir / f"{cluster['kube_context']}-verify-fabric.json"
        if not kept_path.is_file():
            raise RunFailed(f"verify-fabric exited {sample.code} and kept no evidence in {evidence_dir}")
        kept = json.loads(kept_path.read_text())
        inter = kept["evidence"]["inter_node"]
        if sample.code != 1 or inter.get("culprits") != [slow]:
            raise RunFailed(f"verify-fabric named {inter.get('culprits')} for a slow link of {slow}")
        runs.append({"slow": slow, "rounds": inter["rounds"], "wall_s": round(sample.wall_s, 2)})
    return runs
