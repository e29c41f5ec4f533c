"""Read-only verifiers of deployed clusters, run through each cluster's registered kubeconfig.

`verify_mig`: MIG readiness of every selected MIG cluster, checked as the deploy gate does (the exact
mixed / all-balanced layout on every GPU node, two consecutive exact snapshots, then what `nvidia-smi` lists
on each node through a probe pod that requests no GPU and is deleted by UID). `wait` polls until ready
or the timeout. `reconcile` (which waits too) makes the repairs the original tool's skill defines
(npa_pulumi/kube/gpu_health/repair.py), as the findings call for them and in its order: stale `OnDelete`
driver pods replaced one worker at a time (cordon, recheck, delete by UID, a ready replacement, the node's
prior scheduling state restored), the stale `mig-not-ready` taint removed when it is the only thing wrong,
GPU feature discovery then the device plugin restarted when only the advertised resources are wrong. Every
repair is refused, with nothing changed, while a pod outside the GPU operator uses an `nvidia.com/*`
resource; each step goes to a private receipt (engine/verification/repair_receipts.py); after a repair the
full gate (stabilization, nvidia-smi, the MIG smoke) runs again.

`verify_graphics`: on every GPU worker of each selected RTX rendering cluster, the CUDA vectorAdd smoke and
graphics readiness (GLX, EGL, Vulkan enumerating an NVIDIA device), as the deploy gate runs them, each pod
deleted with a UID precondition; a partial result (a worker missing from the evidence) fails closed. With
`reconcile`, the same repairs as `verify_mig` (the taint aside) first, then the gate.

`verify_storage`: on every worker of each selected cluster with a shared filesystem, the declared virtiofs
mount (read-write, `nofail` in fstab, its capacity in GiB) and one ReadWriteMany claim of the recipe's
shared-filesystem class that every worker writes a unique payload to and reads every other's from
(npa_pulumi/kube/storage_check.py); probe objects are labelled with the run, removed with UID
preconditions and proven absent; a failed cleanup or a worker missing from the evidence fails. A cluster
whose spec disables the filesystem is skipped (and passes).

Targets run `concurrency` at a time; results keep the spec's order.

A selected cluster that is not a MIG (resp. RTX rendering) cluster, or has no registered kubeconfig (it
was never deployed from this machine's npa home: `up` registers it), fails closed with the reason; so does
one whose registration no longer matches this run's stack, cloud and profile, the stack's outputs and the
live cloud (engine/registrations/kubeconfigs.py): nothing is probed then. `verify_graphics` waits the
declared stability interval (the gate's stabilization, no smoke) before its probes.

What a verifier returns is publishable (output/evidence.py): counts, categories, hashes and pass/fail per
node. The exact evidence goes only to the private evidence directory (0700, files 0600), never inside a git
work tree (it would be one `git add` from being committed).
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.automation import StackOp
from npa_pulumi.engine.graph import parallel
from npa_pulumi.engine.registrations import kubeconfigs
from npa_pulumi.engine.verification.repair_receipts import RepairReceipt
from npa_pulumi.errors import UserInputError
from npa_pulumi.output.evidence import PRIVATE_HINT, PUBLISHERS, canonical, evidence_hash, name_hash
from npa_pulumi.output.results import FleetResult, StackResult
from npa_pulumi.plan.gates import health_gate_config
from npa_pulumi.plan.naming import kube_context_name
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.spec.constants import RTX_RENDERING_PROFILE

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext
    from npa_pulumi.plan import Target


@dataclass(frozen=True)
class VerifyOptions:
    wait: bool = False
    reconcile: bool = False
    timeout_s: float = 600.0
    poll_s: float = 2.0
    evidence_dir: Path | None = None
    concurrency: int = 4


def check_evidence_dir(directory: Path) -> Path:
    """The evidence directory, refused inside a git work tree; created 0700."""
    resolved = directory.expanduser().resolve()
    probe = resolved if resolved.is_dir() else resolved.parent
    while not probe.exists():
        probe = probe.parent
    inside = subprocess.run(
        ["git", "-C", str(probe), "rev-parse", "--is-inside-work-tree"], capture_output=True, text=True
    )
    if inside.returncode == 0 and inside.stdout.strip() == "true":
        raise UserInputError(
            f"--evidence-dir {directory} is inside a git work tree: evidence names your clusters and nodes; "
            "keep it outside any repository"
        )
    resolved.mkdir(parents=True, exist_ok=True, mode=0o700)
    resolved.chmod(0o700)
    return resolved


def _run(
    fleet: FleetContext,
    options: VerifyOptions,
    command: str,
    one: Callable[[FleetContext, Target, VerifyOptions], StackResult],
) -> FleetResult:
    """Run one verifier over every selected target; each target's evidence goes to the evidence dir."""
    result = FleetResult(
        command=command, fleet=fleet.spec.name, cloud=fleet.where.cloud, backend=fleet.settings.backend_url
    )
    evidence_dir = check_evidence_dir(options.evidence_dir) if options.evidence_dir else None
    entries = parallel(fleet.targets, lambda target: one(fleet, target, options), options.concurrency)
    for entry in entries:
        if entry.health is not None:
            _publishable(entry, command, evidence_dir)
        result.stacks.append(entry)
    return result


def _publishable(entry: StackResult, command: str, evidence_dir: Path | None) -> None:
    """Keep the exact evidence (per-node findings, names, the cluster id, the full error) only in the
    evidence dir; leave on `entry` what may be published (output/evidence.py)."""
    assert entry.health is not None
    private = {
        "verifier": command,
        "stack": entry.stack,
        "kube_context": entry.kube_context,
        "cluster_id": entry.cluster_id,
        "status": entry.status,
        "error": entry.error,
        "evidence": entry.health,
    }
    publication = PUBLISHERS[command](entry.health)
    if evidence_dir is not None:
        path = evidence_dir / f"{entry.kube_context}-{command}.json"
        write_atomically(path, canonical(private), mode=0o600)
    entry.health = {
        **publication.summary,
        "cluster_id_sha256": name_hash(entry.cluster_id) if entry.cluster_id else None,
        "evidence_sha256": evidence_hash(private),
        "evidence_kept": evidence_dir is not None,
    }
    entry.cluster_id = None
    if entry.error is not None:
        entry.error = publication.error or "verification failed"
        if evidence_dir is None:
            entry.error += f" ({PRIVATE_HINT})"


def verify_mig(fleet: FleetContext, options: VerifyOptions) -> FleetResult:
    return _run(fleet, options, "verify-mig", _verify_one)


def verify_graphics(fleet: FleetContext, options: VerifyOptions) -> FleetResult:
    return _run(fleet, options, "verify-graphics", _verify_graphics_one)


def verify_storage(fleet: FleetContext, options: VerifyOptions) -> FleetResult:
    return _run(fleet, options, "verify-storage", _verify_storage_one)


def _verify_storage_one(fleet: FleetContext, target: Target, options: VerifyOptions) -> StackResult:
    from npa_pulumi.kube.client import KubeClient, KubeError
    from npa_pulumi.kube.storage_check import StorageConfig, run_storage_check

    context = kube_context_name(fleet.spec.name, target.project_key, target.cluster_name)
    cluster = target.cluster
    if not (cluster.enable_filestore or (cluster.existing_filestore or "").strip()):
        return _entry(
            target, context, "skipped", validation="storage", error="the spec disables the shared filesystem"
        )
    found = _registered_kubeconfig(fleet, target, context, validation="storage")
    if isinstance(found, StackResult):
        return found
    text, cluster_id = found
    config = StorageConfig(
        expected_workers=cluster.cpu_count() + cluster.gpu_count(),
        mount_path=cluster.filestore_mount_path,
        mount_tag=cluster.filestore_mount_tag,
        size_gib=int(cluster.filestore_disk_size_gibibytes),
        timeout_s=options.timeout_s,
    )
    try:
        evidence = run_storage_check(lambda t: KubeClient.from_kubeconfig(text, timeout_s=t), config)
    except KubeError as err:  # the credentials themselves were refused (an exec plugin failing, say)
        evidence = {"passed": False, "failures": [f"the cluster's API refused the check: {err}"]}
    if evidence["passed"]:
        return _entry(target, context, "ready", validation="storage", health=evidence, cluster_id=cluster_id)
    why = "; ".join(evidence["failures"][:5])
    return _entry(
        target,
        context,
        "not-ready",
        validation="storage",
        health=evidence,
        cluster_id=cluster_id,
        error=f"shared storage verification failed: {why}",
    )


def _registered_kubeconfig(
    fleet: FleetContext, target: Target, context: str, validation: str = "mig"
) -> tuple[str, str] | StackResult:
    """The cluster's registered kubeconfig and id, once the record is proven to be this run's cluster:
    its stack, cloud and profile, the stack's outputs and the live cloud
    (engine/registrations/kubeconfigs.py)."""
    registration = kubeconfigs.registered(context)
    if registration is None or not Path(registration.kubeconfig).is_file():
        return _entry(
            target,
            context,
            "failed",
            validation=validation,
            error=f"no registered kubeconfig for {context} on this machine: run `npa-pulumi up` first",
        )
    op = StackOp(target.cluster_stack, "cluster", target.project_key, target.cluster_name, None, {})
    mismatches = kubeconfigs.identity_mismatches(
        registration,
        stack=target.cluster_stack,
        cloud_name=fleet.where.cloud,
        profile=fleet.profile,
        outputs=fleet.stack_outputs([op])[target.cluster_stack],
        cloud=fleet.cloud,
    )
    if mismatches:
        return _entry(
            target, context, "failed", validation=validation, error=kubeconfigs.refuse_stale(mismatches)
        )
    return Path(registration.kubeconfig).read_text(), registration.cluster_id


def _verify_graphics_one(fleet: FleetContext, target: Target, options: VerifyOptions) -> StackResult:
    from npa_pulumi.kube.client import KubeClient
    from npa_pulumi.kube.gpu_health.checks import snapshot
    from npa_pulumi.kube.gpu_health.probes import run_smoke

    context = kube_context_name(fleet.spec.name, target.project_key, target.cluster_name)
    settings = health_gate_config(target.cluster)
    if target.cluster.gpu_workload_profile != RTX_RENDERING_PROFILE:
        return _entry(target, context, "failed", validation="graphics", error="not an RTX rendering cluster")
    found = _registered_kubeconfig(fleet, target, context, validation="graphics")
    if isinstance(found, StackResult):
        return found
    text, cluster_id = found
    config = dataclasses.replace(settings, cuda_smoke=True, graphics_smoke=True)
    started = time.monotonic()
    deadline = started + options.timeout_s
    repaired: dict[str, Any] = {}
    if options.reconcile:
        repairer, receipt = _repairer(fleet, target, context, cluster_id, "verify-graphics", config)
        why_not = _reconcile(text, config, repairer, deadline)
        repaired = _repair_evidence(receipt)
        if isinstance(why_not, list):
            evidence = {"passed": False, "expected_workers": config.expected_gpu_nodes, "workers": {}}
            return _refused(target, context, "verify-graphics", why_not, {**evidence, **repaired})
        if why_not is not None:
            evidence = {"passed": False, "expected_workers": config.expected_gpu_nodes, "workers": {}}
            evidence |= {"repair_error": why_not, **repaired}
            return _entry(
                target,
                context,
                "not-ready",
                validation="graphics",
                health=evidence,
                cluster_id=cluster_id,
                error=why_not,
            )
    # As the original does: the declared stability interval first (every node Ready, boot ids unchanged,
    # the driver components up, for `stabilization_s`), so a probe never judges a node that is still
    # settling after a driver, node or runtime change. After a repair this is the full gate again.
    stable = _stabilized(text, config, max(1.0, deadline - time.monotonic()))
    if not stable["passed"]:
        evidence = {"passed": False, "expected_workers": config.expected_gpu_nodes, "workers": {}, **repaired}
        evidence["stabilization"] = stable
        why = f"not stable for {config.stabilization_s:g}s before the probes: {stable['reason']}"
        return _entry(
            target,
            context,
            "not-ready",
            validation="graphics",
            health=evidence,
            cluster_id=cluster_id,
            error=why,
        )
    client = KubeClient.from_kubeconfig(text, timeout_s=10.0)
    workers = sorted(snapshot(client, config, 0.0).gpu_nodes)
    results: dict[str, Any] = {}
    for node in workers:
        cuda = run_smoke(client, config, node, deadline, time.monotonic)
        graphics = run_smoke(client, config, node, deadline, time.monotonic, kind="graphics")
        results[node] = {"cuda": cuda, "graphics": graphics}
    passed = [n for n, r in results.items() if r["cuda"]["passed"] and r["graphics"]["passed"]]
    complete = len(workers) == config.expected_gpu_nodes and len(passed) == len(workers)
    evidence = {
        "passed": complete,
        "expected_workers": config.expected_gpu_nodes,
        "workers": results,
        "stabilization": stable,
        "elapsed_s": round(time.monotonic() - started, 2),
        **repaired,
    }
    if complete:
        return _entry(target, context, "ready", validation="graphics", health=evidence, cluster_id=cluster_id)
    failed = sorted(set(workers) - set(passed))
    why = (
        f"graphics verification failed on {', '.join(failed)}"
        if failed
        else f"partial evidence: {len(workers)} GPU worker(s) found, {config.expected_gpu_nodes} expected"
    )
    return _entry(
        target, context, "not-ready", validation="graphics", health=evidence, cluster_id=cluster_id, error=why
    )


_SETTLE_S = 60.0  # how long findings no repair answers may stay unchanged before the gate judges them


def _reconcile(kubeconfig: str, config: Any, repairer: Any, deadline: float) -> list[str] | str | None:
    """`verify-graphics --reconcile`: the repairs the cluster's findings call for, one after the other (each
    at most once), before the gate runs. It looks again after each repair, and while the findings change
    (a rollout settling, the pod garbage collector removing a pod of a node that left); it stops once they
    are clean, or when no repair answers them and they stayed the same for a minute (at most half the time
    left): the gate then judges them. The GPU workloads that refused a repair (nothing changed), the error
    of one that failed, or None."""
    from npa_pulumi.kube.client import KubeClient
    from npa_pulumi.kube.gpu_health.checks import snapshot

    previous: list[str] | None = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        client = KubeClient.from_kubeconfig(
            kubeconfig, timeout_s=min(10.0, max(1.0, deadline - time.monotonic()))
        )
        errors = snapshot(client, config, 0.0).errors
        if not errors:
            return None
        outcome = repairer.attempt(client, errors, deadline)
        if outcome is not None and outcome.refused:
            return list(outcome.workloads)
        if outcome is not None and outcome.error:
            return str(outcome.error)
        now = time.monotonic()
        if outcome is not None or errors != previous:
            previous, since = errors, now
        elif now - since >= min(_SETTLE_S, (deadline - since) / 2):
            return None
        if outcome is None:
            time.sleep(min(config.poll_s, max(0.0, deadline - time.monotonic())))
    return None


def _stabilized(kubeconfig: str, config: Any, timeout_s: float) -> dict[str, Any]:
    """The gate's stabilization alone (no smoke), bounded by the verifier's timeout."""
    from npa_pulumi.kube.client import KubeClient
    from npa_pulumi.kube.gpu_health.gate import run_gate

    window = dataclasses.replace(config, cuda_smoke=False, graphics_smoke=False, timeout_s=timeout_s)
    found = run_gate(lambda t: KubeClient.from_kubeconfig(kubeconfig, timeout_s=t), window)
    return {
        "passed": found.passed,
        "reason": found.reason,
        "stabilization_s": config.stabilization_s,
        "stable_after_s": found.stable_after_s,
        "snapshots": found.snapshots,
        "errors": found.last_errors,
    }


def _entry(target: Target, context: str, status: str, **fields: Any) -> StackResult:
    return StackResult(
        stack=target.cluster_stack,
        kind="cluster",
        project_key=target.project_key,
        cluster_name=target.cluster_name,
        kube_context=context,
        status=status,
        **{"validation": "mig", **fields},
    )


def _repairer(
    fleet: FleetContext, target: Target, context: str, cluster_id: str, verifier: str, config: Any
) -> Any:
    """The cluster's repairer, journaling into a private receipt (engine/verification/repair_receipts.py)."""
    from npa_pulumi.kube.gpu_health.repair import Repairer

    receipt = RepairReceipt(context, verifier, target.cluster_stack, cluster_id)
    return Repairer(config, receipt.record), receipt


def _repair_evidence(receipt: RepairReceipt) -> dict[str, Any]:
    return {
        "repairs": list(receipt.steps),
        "repairs_done": receipt.done(),
        "repair_receipt": str(receipt.path) if receipt.path else None,
    }


def _refused(
    target: Target, context: str, verifier: str, users: list[str], evidence: dict[str, Any]
) -> StackResult:
    """A repair refused while GPU workloads run: nothing was changed; the workloads are named privately."""
    evidence = {**evidence, "gpu_workloads": users}
    return _entry(
        target,
        context,
        "not-ready",
        validation="graphics" if verifier == "verify-graphics" else "mig",
        health=evidence,
        error=f"refusing to repair while GPU workloads run: {', '.join(users)}; delete them and run "
        f"{verifier} --reconcile again",
    )


def _verify_one(fleet: FleetContext, target: Target, options: VerifyOptions) -> StackResult:
    from npa_pulumi.kube.client import KubeClient
    from npa_pulumi.kube.gpu_health.checks import snapshot
    from npa_pulumi.kube.gpu_health.gate import run_gate
    from npa_pulumi.kube.gpu_health.mig import run_mig_hardware

    context = kube_context_name(fleet.spec.name, target.project_key, target.cluster_name)
    settings = health_gate_config(target.cluster)
    if target.cluster.mig is None or not settings.mig_resources:
        return _entry(target, context, "failed", error="not a MIG cluster (its spec enables no mig)")
    found = _registered_kubeconfig(fleet, target, context)
    if isinstance(found, StackResult):
        return found
    text, cluster_id = found
    config = dataclasses.replace(settings, poll_s=options.poll_s, cuda_smoke=False)
    repairer, receipt = _repairer(fleet, target, context, cluster_id, "verify-mig", config)
    started = time.monotonic()
    # --reconcile waits as --wait does: a repair (a driver pod's replacement, a rollout) takes time
    waits = options.wait or options.reconcile
    deadline = started + (options.timeout_s if waits else max(options.poll_s * 3, 10.0))
    clean, snapshots = 0, 0
    errors: list[str] = []
    while True:
        client = KubeClient.from_kubeconfig(text, timeout_s=min(10.0, max(1.0, deadline - time.monotonic())))
        snap = snapshot(client, config, round(time.monotonic() - started, 2))
        snapshots += 1
        errors = snap.errors
        if not errors:
            clean += 1
            if clean >= config.clean_snapshots_needed:
                break
        else:
            clean = 0
            outcome = repairer.attempt(client, errors, deadline) if options.reconcile else None
            if outcome is not None and outcome.refused:
                evidence = {"ready": False, "errors": errors, **_repair_evidence(receipt)}
                evidence["repaired_stale_taint_on"] = _untainted(receipt)
                return _refused(target, context, "verify-mig", outcome.workloads, evidence)
            if outcome is not None and outcome.error:
                errors = [*errors, outcome.error]
                break
            if outcome is not None:
                continue  # look again at once
        if time.monotonic() >= deadline:
            break
        time.sleep(min(options.poll_s, max(0.0, deadline - time.monotonic())))
    ready = clean >= config.clean_snapshots_needed
    hardware: dict[str, Any] = {}
    if ready:
        # The node objects agree with the layout; the driver must too (a GPU whose MIG mode was reset
        # keeps its advertised resources until the device plugin restarts). Its own short deadline, so a
        # verify without --wait still gets to read every node.
        client = KubeClient.from_kubeconfig(text, timeout_s=10.0)
        probe_deadline = max(deadline, time.monotonic() + 60.0)
        hardware, errors = run_mig_hardware(client, config, snap.gpu_nodes, probe_deadline, time.monotonic)
        ready = not errors
    gate: dict[str, Any] | None = None
    if ready and repairer.changed:
        # After a repair, the full gate again (as at deploy: stabilization, nvidia-smi, the MIG smoke),
        # with what is left of the deadline (at least a minute, for the probes).
        full = dataclasses.replace(settings, timeout_s=max(60.0, deadline - time.monotonic()))
        found_gate = run_gate(lambda t: KubeClient.from_kubeconfig(text, timeout_s=t), full)
        gate = found_gate.to_json()
        if not found_gate.passed:
            ready, errors = (
                False,
                [f"the gate after the repair: {found_gate.reason}", *found_gate.last_errors],
            )
    evidence = {
        "ready": ready,
        "snapshots": snapshots,
        "elapsed_s": round(time.monotonic() - started, 2),
        "errors": errors[:20],
        "repaired_stale_taint_on": _untainted(receipt),
        "nodes": sorted(snap.gpu_nodes),
        "hardware": hardware,
        "gate_after_repair": gate,
        **_repair_evidence(receipt),
    }
    if ready:
        return _entry(target, context, "ready", health=evidence, cluster_id=cluster_id)
    why = "; ".join(errors[:5])
    return _entry(
        target,
        context,
        "not-ready",
        health=evidence,
        cluster_id=cluster_id,
        error=f"MIG not ready: {why}",
    )


def _untainted(receipt: RepairReceipt) -> list[str]:
    return [str(s["node"]) for s in receipt.steps if s.get("step") == "untainted"]
