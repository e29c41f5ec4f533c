"""The whole gate, bounded by one deadline: snapshots until stable, then (MIG) the hardware probe, the
CUDA smoke and (RTX rendering) the graphics smoke on every GPU node; the evidence of what held."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from npa_pulumi.kube.client import KubeClient
from npa_pulumi.kube.gpu_health.checks import snapshot
from npa_pulumi.kube.gpu_health.config import JSON, Evidence, GateConfig, Snapshot
from npa_pulumi.kube.gpu_health.mig import run_mig_hardware
from npa_pulumi.kube.gpu_health.probes import PROBE_IMAGE_INCOMPLETE, run_smoke

_CALL_CAP_S = 10.0  # no single API call waits longer than this


def run_gate(
    client_for: Callable[[float], KubeClient],
    config: GateConfig,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Evidence:
    """The whole gate. `client_for(timeout_s)` gives a client whose calls wait at most `timeout_s`."""
    started = clock()
    deadline = started + config.timeout_s
    baseline: dict[str, str] | None = None
    stable_since: float | None = None
    last = Snapshot(at_s=0.0)
    count = 0
    clean = 0  # consecutive snapshots without an error
    hardware: dict[str, JSON] = {}  # node -> what nvidia-smi listed (MIG clusters)

    def evidence(passed: bool, phase: str, reason: str, smoke: dict[str, JSON] | None = None) -> Evidence:
        nodes = {
            name: {"ready": last.ready.get(name, False), "boot_id": boot, "gpu": name in last.gpu_nodes}
            for name, boot in last.boot_ids.items()
        }
        for name, result in (smoke or {}).items():
            nodes.setdefault(name, {})["smoke"] = result
        for name, report in hardware.items():
            nodes.setdefault(name, {})["mig_hardware"] = report
        stable = None if stable_since is None else round(stable_since - started, 2)
        elapsed = round(clock() - started, 2)
        finished = datetime.now(UTC).isoformat(timespec="seconds")
        return Evidence(passed, phase, reason, elapsed, count, last.errors[:20], nodes, stable, finished)

    while True:
        now = clock()
        if now > deadline:
            why = "; ".join(last.errors[:5]) or "no clean snapshot"
            return evidence(
                False,
                "stabilization",
                f"not healthy for {config.stabilization_s:g}s before the timeout: {why}",
            )
        client = client_for(min(_CALL_CAP_S, max(1.0, deadline - now)))
        last = snapshot(client, config, round(now - started, 2))
        count += 1
        if last.complete(config):
            if baseline is None:
                baseline = dict(last.boot_ids)
            elif last.boot_ids != baseline:
                changed = sorted(
                    set(baseline.items()).symmetric_difference(last.boot_ids.items()), key=lambda kv: kv[0]
                )
                names = sorted({name for name, _ in changed})
                return evidence(
                    False,
                    "stabilization",
                    f"boot ids changed during stabilization ({', '.join(names)}): "
                    "a node rebooted or was replaced",
                )
        if last.errors:
            stable_since, clean = None, 0
        else:
            clean += 1
            if stable_since is None:
                stable_since = now
        stable_long_enough = stable_since is not None and now - stable_since >= config.stabilization_s
        if stable_long_enough and clean >= config.clean_snapshots_needed:
            break
        sleep(min(config.poll_s, max(0.0, deadline - clock())))

    if config.mig and last.gpu_nodes:
        client = client_for(min(_CALL_CAP_S, max(1.0, deadline - clock())))
        found, errors = run_mig_hardware(client, config, last.gpu_nodes, deadline, clock)
        hardware.update(found)
        if errors:
            last.errors = errors
            return evidence(False, "mig-hardware", f"nvidia-smi disagrees: {'; '.join(errors[:3])}")
    if not config.cuda_smoke or not last.gpu_nodes:
        return evidence(True, "done", "healthy")
    results: dict[str, JSON] = {}
    for node in sorted(last.gpu_nodes):
        client = client_for(min(_CALL_CAP_S, max(1.0, deadline - clock())))
        results[node] = run_smoke(client, config, node, deadline, clock)
    failed = [n for n, r in results.items() if not r["passed"]]
    leftovers = [n for n, r in results.items() if r.get("cleaned_up") is False]
    if failed:
        return evidence(False, "smoke", f"CUDA smoke failed on {', '.join(failed)}", results)
    if leftovers:
        return evidence(
            False, "smoke", f"smoke pods could not be removed from {', '.join(leftovers)}", results
        )
    if not config.graphics_smoke:
        return evidence(True, "done", "healthy; CUDA smoke passed on every GPU node", results)
    for node in sorted(last.gpu_nodes):
        client = client_for(min(_CALL_CAP_S, max(1.0, deadline - clock())))
        results[node]["graphics"] = run_smoke(client, config, node, deadline, clock, kind="graphics")
    incomplete = {
        n: r["graphics"]["image_lacks"] for n, r in results.items() if r["graphics"].get("image_lacks")
    }
    if incomplete:
        lacks = sorted({tool for tools in incomplete.values() for tool in tools})
        return evidence(
            False,
            "graphics",
            f"{PROBE_IMAGE_INCOMPLETE}: the graphics probe's image {config.graphics_image} lacks "
            f"{', '.join(lacks)} (on {', '.join(sorted(incomplete))}); not a GPU failure: set "
            "gpu_graphics_smoke_image to a digest-pinned image that ships bash, python3 and vulkaninfo",
            results,
        )
    failed = [n for n, r in results.items() if not r["graphics"]["passed"]]
    if failed:
        why = "; ".join(
            f"{n}: missing {', '.join(results[n]['graphics'].get('missing') or ['a result'])}" for n in failed
        )
        return evidence(False, "graphics", f"graphics readiness failed ({why})", results)
    return evidence(True, "done", "healthy; CUDA and GLX/EGL/Vulkan passed on every GPU node", results)
