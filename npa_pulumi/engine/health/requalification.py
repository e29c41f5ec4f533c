"""`health --requalify`: the health gate's per-node probes on exactly the nodes that joined after the last
gate pass, and the record of what they found.

Per unqualified GPU node, in order, all bounded by one deadline:

1. refused (fail closed, nothing created) while a pod outside the GPU operator holds an `nvidia.com/*`
   resource on that node: the probes need its GPUs, and a node already running work is not touched;
2. the gate's node checks from one snapshot (Ready, a boot id, the preset's GPUs in capacity and
   allocatable, no NebiusGPUError, the NVSwitch fabric state; on MIG clusters the exact layout);
3. the gate's probes pinned to that node: MIG's `nvidia-smi` hardware probe, the CUDA smoke, and on RTX
   rendering clusters the graphics smoke; each pod deleted by UID and waited for (a pod left behind fails);
4. on a cluster whose fabric check applies, once any node passed its own probes: the fabric check over the
   cluster's GPU nodes (NCCL on each node, then across all of them, the culprit search when that is slow;
   npa_pulumi/kube/fabric_check.py), refused while pods hold GPUs anywhere in the cluster (the benchmark
   needs every GPU). A node it names (slow alone, or on a slow link) fails; so does every node when it
   fails without naming one (refused, timed out: fail closed). A node it clears keeps its pass even when
   it names another node, which stays as qualified as it was (`verify-fabric` is the check for that).

The record is kept beside the cluster's kubeconfig registration, under the npa home
(`<npa home>/health/<context>.json`, 0600): a node's entry holds its name, uid and boot id, `passed`,
`at`, its `errors` and the probes' evidence. It qualifies exactly that node object (its uid): a node
re-created under the same name is judged again. `health` and `status` read it; a node whose
requalification failed stays `unqualified` with its errors. It goes where the registration goes: the
kubeconfig that reached the node is on this machine too.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from npa_pulumi.kube.client import KubeClient, KubeError
from npa_pulumi.kube.gpu_health.checks import snapshot
from npa_pulumi.kube.gpu_health.config import JSON, GateConfig, quantity
from npa_pulumi.kube.gpu_health.mig import run_mig_hardware
from npa_pulumi.kube.gpu_health.probes import run_smoke
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import npa_home

OPERATOR_NAMESPACE = "gpu-operator"


def record_path(context: str) -> Path:
    return npa_home() / "health" / f"{context}.json"


def read_record(context: str) -> dict[str, Any] | None:
    try:
        found = json.loads(record_path(context).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def write_record(context: str, stack: str, cluster_id: str, nodes: Mapping[str, JSON]) -> Path:
    """Merge these nodes' results into the cluster's record (a record of another cluster id starts over)."""
    existing = read_record(context) or {}
    kept = existing.get("nodes") or {} if existing.get("cluster_id") == cluster_id else {}
    document = {"context": context, "stack": stack, "cluster_id": cluster_id, "nodes": {**kept, **nodes}}
    path = record_path(context)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomically(path, json.dumps(document, indent=2, sort_keys=True) + "\n", mode=0o600)
    return path


def summary(context: str, cluster_id: str) -> dict[str, Any] | None:
    """What `status` shows of the record: per node `passed`, `at` and its errors; None without one (or
    with a record of another cluster id)."""
    found = read_record(context)
    if not found or found.get("cluster_id") != cluster_id:
        return None
    nodes = found.get("nodes") or {}
    return {
        name: {"passed": bool(n.get("passed")), "at": n.get("at", ""), "errors": list(n.get("errors") or [])}
        for name, n in sorted(nodes.items())
    }


def remove_record(context: str) -> None:
    record_path(context).unlink(missing_ok=True)


def judge_fabric(entries: Mapping[str, JSON], evidence: Mapping[str, Any]) -> JSON:
    """The fabric check's verdict on the nodes that passed their own probes (their entries change: the
    check's summary under `probes.fabric`, and a node it implicates fails with its reason); the summary
    recorded beside the requalification."""
    inter = evidence.get("inter_node") or {}
    culprits = [str(c) for c in inter.get("culprits") or []]
    implicated = {str(n) for n in evidence.get("slow_nodes") or []}
    for culprit in culprits:
        implicated.update(part.strip() for part in culprit.split("<->"))
    summary: JSON = {
        "status": evidence.get("status"),
        "passed": bool(evidence.get("passed")),
        "reason": evidence.get("reason", ""),
        "slow_nodes": sorted(implicated),
        "culprits": culprits,
        "rounds": inter.get("rounds"),
        "elapsed_s": evidence.get("elapsed_s"),
    }
    for name, entry in entries.items():
        if not entry.get("passed"):
            continue
        entry.setdefault("probes", {})["fabric"] = summary
        if summary["passed"] or (implicated and name not in implicated):
            continue
        entry["passed"] = False
        entry["errors"] = [*entry.get("errors", []), f"{name}: fabric check: {summary['reason']}"]
    return summary


def gpu_holders(client: KubeClient, node: str) -> list[str]:
    """Active pods on `node` outside the GPU operator that request or limit an `nvidia.com/*` resource."""
    selector = urllib.parse.quote(f"spec.nodeName={node}")
    pods = client.get(f"/api/v1/pods?fieldSelector={selector}").get("items") or []
    return holders_by_node(pods).get(node, [])


def holders_by_node(pods: Iterable[JSON]) -> dict[str, list[str]]:
    """Per node, its active pods outside the GPU operator that request or limit an `nvidia.com/*`
    resource (namespace/name, sorted): one list of a cluster's pods answers for all its nodes."""
    found: dict[str, list[str]] = {}
    for pod in pods:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        if meta.get("namespace") == OPERATOR_NAMESPACE or not spec.get("nodeName"):
            continue
        if (pod.get("status") or {}).get("phase") not in ("Pending", "Running"):
            continue
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            resources = container.get("resources") or {}
            wanted = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
            if any(k.startswith("nvidia.com/") and quantity(v) > 0 for k, v in wanted.items()):
                found.setdefault(str(spec["nodeName"]), []).append(f"{meta.get('namespace')}/{meta['name']}")
                break
    return {node: sorted(names) for node, names in found.items()}


def requalify_node(
    client_for: Callable[[float], KubeClient],
    config: GateConfig,
    node: JSON,
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
) -> JSON:
    """The gate's checks and probes on one node; its record entry (`refused` when GPUs are held)."""
    meta = node["metadata"]
    name = meta["name"]
    entry: JSON = {
        "uid": meta.get("uid", ""),
        "boot_id": str(((node.get("status") or {}).get("nodeInfo") or {}).get("bootID") or ""),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "passed": False,
        "errors": [],
    }
    client = client_for(10.0)
    try:
        holders = gpu_holders(client, name)
    except KubeError as err:
        entry["errors"] = [f"cannot list the node's pods: {err}"]
        return entry
    if holders:
        entry["refused"] = holders
        entry["errors"] = [f"pods hold its GPUs: {', '.join(holders)}"]
        return entry
    snap = snapshot(client, config, 0.0)
    errors = [e for e in snap.errors if e.startswith(f"{name}:")]
    if name not in snap.gpu_nodes:
        errors.append(f"{name}: not a GPU node of this cluster any more")
    if errors:
        entry["errors"] = errors
        return entry
    probes: JSON = {}
    if config.mig:
        hardware, mig_errors = run_mig_hardware(client_for(10.0), config, [name], deadline, clock)
        probes["mig_hardware"] = hardware.get(name)
        errors += mig_errors
    if not errors and config.cuda_smoke:
        probes["smoke"] = run_smoke(client_for(10.0), config, name, deadline, clock)
        if not probes["smoke"]["passed"]:
            errors.append(f"{name}: CUDA smoke {probes['smoke'].get('phase')}")
    if not errors and config.graphics_smoke:
        probes["graphics"] = run_smoke(client_for(10.0), config, name, deadline, clock, kind="graphics")
        graphics = probes["graphics"]
        if graphics.get("image_lacks"):  # the probe's image, not the node: said apart
            errors.append(
                f"{name}: {graphics['category']}: the probe's image lacks {graphics['image_lacks']}"
            )
        elif not graphics["passed"]:
            errors.append(f"{name}: graphics readiness missing {graphics.get('missing')}")
    left = [k for k, p in probes.items() if isinstance(p, dict) and p.get("cleaned_up") is False]
    errors += [f"{name}: the {k} probe pod could not be removed" for k in left]
    entry |= {"passed": not errors, "errors": errors, "probes": probes}
    return entry
