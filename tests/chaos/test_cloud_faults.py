"""Cloud faults, injected into the local cloud across processes (preflight in the CLI, the dynamic
providers in Pulumi's plugin host, the recipe's provisioners under terraform):

* a quota refusal stops the run before any mutation: the tenant's quota falls short, or the quota read
  itself is refused; nothing is created, no stack is written;
* `unavailable` and latency on reads, and on creates that carry an idempotency key, are retried with
  growing backoff: the run succeeds and creates everything exactly once;
* `unavailable` on a create without a key is not repeated (it might have happened): that project fails,
  nothing is duplicated, and the next `up` converges;
* a quota refusal in the middle of a run (an answer, not a transient) fails only its cluster, leaves
  nothing behind and is not retried.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from chaos_helpers import (
    CliResult,
    FleetShape,
    assert_converged,
    assert_no_leaks,
    backend_root,
    inventory,
    npa,
    secret_values,
    stack_names,
)

from npa_pulumi.runtime.retry import DEFAULT_ATTEMPTS

BLOCK = "capacityblockgroup-local1"
SPEC = f"""\
apiVersion: npa.fleet/v0.0.1
name: faults
region: us-central1
defaults:
  cpu_nodes: {{count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
  enable_filestore: false
projects:
  - name: faults-alpha
    object_storage: {{enabled: true, storage_class: standard, size_gibibytes: 16}}
    clusters:
      - name: f1
        gpu_nodes:
          {{count: 2, platform: gpu-rtx6000, preset: 2gpu-48vcpu-436gb, capacity_block_group: {BLOCK}}}
      - name: f2
"""
BETA = """\
  - name: faults-beta
    clusters:
      - name: b1
"""
TOO_BIG = """\
      - name: huge
        gpu_nodes: {count: 100, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        enable_gpu_cluster: false
"""


def _fault(op: str, error: str | None, count: int, latency_ms: int = 0) -> None:
    args = ["local-cloud", "fault", "add", "--op", op, "--count", str(count)]
    if error:
        args += ["--error", error]
    if latency_ms:
        args += ["--latency-ms", str(latency_ms)]
    npa(*args, check=True)


def _faults_left() -> list[dict[str, Any]]:
    faults: list[dict[str, Any]] = npa("local-cloud", "fault", "list", "--output", "json", check=True).json()
    return faults


def _backend_digest() -> str:
    """Every file of Pulumi state (checkpoints, history, backups, locks)."""
    digest = hashlib.sha256()
    root = backend_root() / ".pulumi"
    for path in sorted(root.rglob("*")) if root.exists() else []:
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _objects(cloud: dict[str, Any]) -> dict[str, list[str]]:
    kinds = ("projects", "networks", "subnets", "mk8s_clusters", "node_groups", "filesystems", "buckets")
    return {
        kind: sorted(o["id"] for o in cloud[kind]) for kind in (*kinds, "service_accounts", "access_keys")
    }


def _up(spec: Path, *extra: str) -> CliResult:
    return npa("up", "--spec", str(spec), "--yes", "-j", "2", "--output", "json", *extra)


def test_quota_refusals_stop_the_run_before_any_mutation(chaos_home: Path, tmp_path: Path) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC + TOO_BIG)
    before, backend = _objects(inventory()), _backend_digest()

    # The tenant's GPU quota cannot hold the new cluster: preflight refuses the whole run.
    refused = _up(spec)
    assert refused.code == 1, refused.why()
    document = refused.json()
    assert document["preflight"]["ok"] is False
    short = {r["name"] for r in document["preflight"]["requirements"] if r.get("shortfall")}
    assert "compute.instance.gpu.h200" in short
    assert "nothing was created or changed" in refused.stderr.lower() or document.get("error")
    assert _objects(inventory()) == before
    assert stack_names() == [] and _backend_digest() == backend

    # The quota read itself is refused (an injected quota error on it): preflight fails closed.
    spec.write_text(SPEC)
    _fault("list_quota_allowances", "quota-exceeded", count=1)
    refused = _up(spec)
    assert refused.code == 1, refused.why()
    assert "quota" in (refused.stdout + refused.stderr).lower()
    assert _objects(inventory()) == before
    assert stack_names() == [] and _backend_digest() == backend
    assert _faults_left() == []


def test_transient_faults_are_retried_where_safe(chaos_home: Path, tmp_path: Path) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    shape = FleetShape.of(SPEC)

    # Reads in the CLI (preflight, live checks) and in the providers, keyed creates in the recipe; latency
    # on everything. Each read fault is one attempt short of the retry budget.
    for op in ("list_quota_allowances", "list_capacity_block_groups", "list_projects", "list_subnets"):
        _fault(op, "unavailable", count=DEFAULT_ATTEMPTS - 1)
    for op in ("find_bucket", "get_bucket", "find_service_account"):
        _fault(op, "unavailable", count=2)
    _fault("create_cluster", "unavailable", count=DEFAULT_ATTEMPTS - 1)  # shared by two parallel creates
    _fault("create_node_group", "unavailable", count=1)
    _fault("*", None, count=40, latency_ms=150)
    deployed = _up(spec)
    assert deployed.code == 0, deployed.why()
    assert {s["status"] for s in deployed.json()["stacks"]} == {"deployed"}
    left = [f for f in _faults_left() if f["op"] != "*"]
    assert left == [], f"faults never hit (the operation was not called, or not retried): {left}"
    assert_converged(shape, "after retried faults")
    cloud = inventory()
    assert (
        len(cloud["buckets"]) == 1 and len(cloud["service_accounts"]) == 1 and len(cloud["access_keys"]) == 1
    )

    # Upstream's creates go through the nebius provider, which retries `unavailable` as the SDK does (the
    # one retry policy, npa_pulumi/runtime/retry.py; its backoff is unit-tested in test_runtime_retry.py):
    # every armed fault was taken above, and each create still made exactly one cluster (converged).

    npa("local-cloud", "fault", "clear", check=True)  # the rest of the latency budget, if any

    # A create without an idempotency key (a new project, by name) is not repeated: it fails, once.
    spec.write_text(SPEC + BETA)
    shape = FleetShape.of(SPEC + BETA)
    _fault("create_project", "unavailable", count=1)
    failed = _up(spec)
    assert failed.code == 1, failed.why()
    stacks = {s["stack"]: s for s in failed.json()["stacks"]}
    assert stacks["faults.faults-beta"]["status"] == "failed"
    assert "unavailable" in stacks["faults.faults-beta"]["error"].lower()
    assert stacks["faults.faults-beta.b1"]["status"] == "skipped"
    assert stacks["faults.faults-beta"]["retry_command"].startswith("npa-pulumi up --spec")
    assert [p for p in inventory()["projects"] if p["name"] == "faults-beta"] == []
    assert _faults_left() == []
    again = _up(spec)
    assert again.code == 0, again.why()
    assert_converged(shape, "after the unkeyed create failed once")

    # A quota refusal mid-run is an answer: no retry, the cluster fails alone and leaves nothing behind.
    spec.write_text(SPEC + BETA + "      - name: b2\n")
    _fault("create_cluster", "quota-exceeded", count=1)
    partial = _up(spec)
    assert partial.code == 1, partial.why()
    stacks = {s["stack"]: s for s in partial.json()["stacks"]}
    assert stacks["faults.faults-beta.b2"]["status"] == "failed"
    assert "quota" in stacks["faults.faults-beta.b2"]["error"].lower()
    assert _faults_left() == []
    assert "b2" not in [c["name"] for c in inventory()["mk8s_clusters"]]
    healed = _up(spec)
    assert healed.code == 0, healed.why()
    assert_converged(FleetShape.of(spec.read_text()), "after the mid-run quota refusal")
    assert_no_leaks(chaos_home, secret_values(FleetShape.of(spec.read_text()), [BLOCK]))
