"""What a verifier may publish, and what only its private evidence directory holds.

The verifiers' stdout and JSON documents end up in CI logs and pull-request comments, so they carry only
counts, categories, hashes and pass/fail per node (a node is named by the SHA-256 of its name). The exact
evidence (node names, pod names, mount tables, paths, probe output, workload names, the cluster's id, the
full error text) goes only to `--evidence-dir` (engine/verification/verifiers.py writes it there, 0600), and
the published summary carries the SHA-256 of that file's content, so a reviewer holding it can tie the two
together.

A category is a fixed word per kind of finding (`host_mount`, `mig-mode`, `graphics`, ...): never text
taken from the cluster.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

# MIG (and gate) findings by what they say, first match wins; anything else is `other`.
_MIG_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("repair failed", "repair"),
    ("the gate after the repair", "gate-after-repair"),
    ("older template", "stale-driver-pod"),
    ("node selector does not match", "driver-selector"),
    ("repository", "driver-repositories"),
    ("mig-not-ready:NoSchedule", "stale-taint"),
    ("taint could not be removed", "repair"),
    ("MIG mode", "mig-mode"),
    ("MIG device", "mig-devices"),
    ("nvidia-smi", "hardware-probe"),
    (" driver ", "driver-version"),
    ("NebiusGPUError", "gpu-error"),
    ("fabric", "fabric"),
    ("label ", "labels"),
    ("capacity", "resources"),
    ("allocatable", "resources"),
    ("not Ready", "node-readiness"),
    ("no boot id", "node-readiness"),
    ("cordoned", "node-readiness"),
    ("ClusterPolicy", "operator"),
    ("DaemonSet", "operator"),
    ("Deployment gpu-operator", "operator"),
    ("driver pod", "operator"),
    ("requested", "node-count"),
    ("cannot ", "api"),
)
_STORAGE_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("left behind", "cleanup"),
    ("not removed", "cleanup"),
    ("could not delete", "cleanup"),
    ("workers changed", "stale-workers"),
    ("worker", "workers"),
    ("StorageClass", "storage-class"),
    ("CSI", "storage-class"),
    ("claim", "claim"),
    ("API", "api"),
)
STORAGE_NODE_CHECKS = ("host_mount", "fstab_nofail", "capacity", "host_io", "shared_write", "shared_read")


@dataclass(frozen=True)
class Publication:
    """The publishable form of one verifier's evidence: the summary and a one-line error."""

    summary: JSON
    error: str | None


@dataclass
class _NodeVerdicts:
    failed: dict[str, list[str]] = field(default_factory=dict)  # node name -> categories
    passed: set[str] = field(default_factory=set)

    def fail(self, node: str, category: str) -> None:
        categories = self.failed.setdefault(node, [])
        if category not in categories:
            categories.append(category)
        self.passed.discard(node)

    def nodes(self) -> list[JSON]:
        names = self.passed | set(self.failed)
        rows = [
            {
                "node_sha256": name_hash(n),
                "passed": n not in self.failed,
                "failed": sorted(self.failed.get(n, [])),
            }
            for n in names
        ]
        return sorted(rows, key=lambda row: str(row["node_sha256"]))


def name_hash(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def evidence_hash(document: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(document).encode()).hexdigest()


def canonical(document: Mapping[str, Any]) -> str:
    """The evidence file's exact content."""
    return json.dumps(document, indent=2, sort_keys=True, default=str) + "\n"


def _category(message: str, table: Iterable[tuple[str, str]]) -> str:
    return next((category for needle, category in table if needle in message), "other")


def _attribute(message: str, nodes: Iterable[str]) -> str | None:
    """The node a finding is about, when it starts with `<node>: `."""
    return next((n for n in nodes if message.startswith(f"{n}: ")), None)


def _categorized(
    messages: Iterable[str], nodes: Iterable[str], table: Iterable[tuple[str, str]], verdicts: _NodeVerdicts
) -> Counter[str]:
    counts: Counter[str] = Counter()
    known = list(nodes)
    for message in messages:
        category = _category(message, table)
        counts[category] += 1
        node = _attribute(message, known)
        if node is not None:
            verdicts.fail(node, category)
    return counts


def _summary(command: str, passed: bool, verdicts: _NodeVerdicts, counts: Counter[str], **extra: Any) -> JSON:
    return {
        "verifier": command,
        "passed": passed,
        "nodes_checked": len(verdicts.passed | set(verdicts.failed)),
        "nodes_failed": len(verdicts.failed),
        "nodes": verdicts.nodes(),
        "failure_categories": dict(sorted(counts.items())),
        **extra,
    }


def _failed_clause(verdicts: _NodeVerdicts, counts: Counter[str], total: int) -> str:
    categories = ", ".join(f"{c} ({n})" for c, n in sorted(counts.items())) or "no finding recorded"
    return f"{len(verdicts.failed)} of {total} node(s) failed; categories: {categories}"


PRIVATE_HINT = "exact per-node evidence goes only to --evidence-dir"


def publish_storage(evidence: JSON) -> Publication:
    nodes = evidence.get("nodes") or {}
    verdicts = _NodeVerdicts(passed=set(nodes))
    for name, verdict in nodes.items():
        for check in STORAGE_NODE_CHECKS:
            if check in verdict and not verdict[check]:
                verdicts.fail(name, check)
    failures = [str(f) for f in evidence.get("failures") or []]
    cluster_level = [f for f in failures if _attribute(f, nodes) is None]
    counts = Counter(c for categories in verdicts.failed.values() for c in categories)
    counts += _categorized(cluster_level, (), _STORAGE_CATEGORIES, verdicts)
    passed = bool(evidence.get("passed"))
    cleanup = evidence.get("cleanup") or {}
    summary = _summary(
        "verify-storage",
        passed,
        verdicts,
        counts,
        expected_workers=evidence.get("expected_workers"),
        requested_gibibytes=evidence.get("requested_gibibytes"),
        capacity_gib_ok=sum(1 for v in nodes.values() if v.get("capacity")),
        cleanup={
            "objects_created": int(cleanup.get("objects_created") or 0),
            "all_removed": bool(cleanup.get("all_removed")),
        },
    )
    error = (
        None
        if passed
        else f"shared storage verification failed: {_failed_clause(verdicts, counts, len(nodes))}"
    )
    return Publication(summary, error)


def _repairs(evidence: JSON) -> JSON:
    """What a verifier's repairs may publish: how many of each kind finished, and whether GPU workloads
    refused one (how many; their names stay private)."""
    return {
        "done": dict(sorted(Counter(str(k) for k in evidence.get("repairs_done") or []).items())),
        "refused_for_gpu_workloads": len(evidence.get("gpu_workloads") or []),
        "receipt_kept": bool(evidence.get("repair_receipt")),
    }


def _refusal(verifier: str, workloads: int) -> str:
    return (
        f"refusing to repair while {workloads} GPU workload(s) run (their names: {PRIVATE_HINT}); nothing "
        f"was changed; delete them and run {verifier} --reconcile again"
    )


def publish_graphics(evidence: JSON) -> Publication:
    workers = evidence.get("workers") or {}
    verdicts = _NodeVerdicts(passed=set(workers))
    for name, result in workers.items():
        for kind in ("cuda", "graphics"):
            found = result.get(kind) or {}
            if found.get("image_lacks"):  # the probe's image lacks a tool: never a GPU failure
                verdicts.fail(name, "probe-image-incomplete")
            elif not found.get("passed"):
                verdicts.fail(name, kind)
            for missing in (result.get(kind) or {}).get("missing") or []:
                verdicts.fail(name, f"graphics-{str(missing).lower()}"[:32])
    counts = Counter(c for categories in verdicts.failed.values() for c in categories)
    expected = int(evidence.get("expected_workers") or 0)
    passed = bool(evidence.get("passed"))
    stable = evidence.get("stabilization") or {}
    summary = _summary(
        "verify-graphics",
        passed,
        verdicts,
        counts,
        expected_workers=expected,
        stabilization_s=stable.get("stabilization_s"),
        stable=bool(stable.get("passed")),
        repairs=_repairs(evidence),
    )
    if passed:
        return Publication(summary, None)
    if evidence.get("gpu_workloads"):
        counts["repair-refused"] += 1
        summary["failure_categories"] = dict(sorted(counts.items()))
        return Publication(summary, _refusal("verify-graphics", len(evidence["gpu_workloads"])))
    if evidence.get("repair_error"):
        counts["repair"] += 1
        summary["failure_categories"] = dict(sorted(counts.items()))
        kind = next(
            (str(s.get("repair")) for s in evidence.get("repairs") or [] if s.get("step") == "failed"), ""
        )
        return Publication(summary, f"repair failed ({kind}): {PRIVATE_HINT}")
    if stable and not stable.get("passed"):
        found = Counter(_category(str(e), _MIG_CATEGORIES) for e in stable.get("errors") or [])
        counts["stabilization"] += 1
        counts += found
        summary["failure_categories"] = dict(sorted(counts.items()))
        waited = stable.get("stabilization_s") or 0
        why = f" ({', '.join(f'{c} ({n})' for c, n in sorted(found.items()))})" if found else ""
        return Publication(
            summary, f"not stable for {waited:g}s before the probes{why}; the probes did not run"
        )
    if verdicts.failed:
        return Publication(
            summary, f"graphics verification failed: {_failed_clause(verdicts, counts, len(workers))}"
        )
    counts["partial-evidence"] += 1
    summary["failure_categories"] = dict(sorted(counts.items()))
    return Publication(summary, f"partial evidence: {len(workers)} GPU worker(s) found, {expected} expected")


def publish_mig(evidence: JSON) -> Publication:
    nodes = [str(n) for n in evidence.get("nodes") or []] + sorted(evidence.get("hardware") or {})
    verdicts = _NodeVerdicts(passed=set(nodes))
    errors = [str(e) for e in evidence.get("errors") or []]
    counts = _categorized(errors, set(nodes), _MIG_CATEGORIES, verdicts)
    workloads = evidence.get("gpu_workloads") or []
    ready = bool(evidence.get("ready"))
    summary = _summary(
        "verify-mig",
        ready,
        verdicts,
        counts,
        snapshots=evidence.get("snapshots"),
        repaired_stale_taint=len(evidence.get("repaired_stale_taint_on") or []),
        gpu_workloads=len(workloads),
        repairs=_repairs(evidence),
    )
    if ready:
        return Publication(summary, None)
    if workloads:
        return Publication(summary, _refusal("verify-mig", len(workloads)))
    return Publication(summary, f"MIG not ready: {_failed_clause(verdicts, counts, len(set(nodes)))}")


def publish_fabric(evidence: JSON) -> Publication:
    """verify-fabric: the figures and thresholds as they are (numbers), nodes only by their hashes; which
    node is slow, by name, is in the evidence file."""
    nodes = {str(name): report for name, report in (evidence.get("nodes") or {}).items()}
    slow = [str(n) for n in evidence.get("slow_nodes") or []]
    inter = evidence.get("inter_node") or {}
    verdicts = _NodeVerdicts(passed=set(nodes) | set(inter.get("nodes") or []))
    counts: Counter[str] = Counter()
    for name, report in nodes.items():
        if not report.get("passed"):
            verdicts.fail(name, "intra-node-bandwidth")
            counts["intra-node-bandwidth"] += 1
    if inter.get("status") == "failed":
        counts["inter-node-bandwidth"] += 1
        for culprit in inter.get("culprits") or []:
            if " <-> " not in str(culprit):
                verdicts.fail(str(culprit), "inter-node-bandwidth")
    status = str(evidence.get("status") or "")
    passed = bool(evidence.get("passed"))
    if not passed and not counts:
        counts["refused" if "refused" in str(evidence.get("reason")) else "other"] += 1
    summary = _summary(
        "verify-fabric",
        passed,
        verdicts,
        counts,
        status=status,
        thresholds=evidence.get("thresholds"),
        images=evidence.get("images"),
        intra_node_busbw_gbps={name_hash(n): r.get("busbw_gbps") for n, r in sorted(nodes.items())},
        inter_node={
            "status": inter.get("status"),
            "busbw_gbps": inter.get("busbw_gbps"),
            "ranks": len(inter.get("nodes") or []) or None,
            "culprits_sha256": [name_hash(str(c)) for c in inter.get("culprits") or []],
        },
        slow_nodes_sha256=[name_hash(n) for n in slow],
        # why it does not apply is the spec's preset, never the cluster's text
        reason=evidence.get("reason") if status == "not-applicable" else None,
    )
    if passed or status == "not-applicable":
        return Publication(summary, None)
    hashes = ", ".join(name_hash(n) for n in slow) or "none named"
    categories = ", ".join(f"{c} ({n})" for c, n in sorted(counts.items()))
    return Publication(
        summary,
        f"fabric below its thresholds on {len(slow)} node(s) (node_sha256: {hashes}); "
        f"categories: {categories}",
    )


PUBLISHERS = {
    "verify-fabric": publish_fabric,
    "verify-storage": publish_storage,
    "verify-graphics": publish_graphics,
    "verify-mig": publish_mig,
}
