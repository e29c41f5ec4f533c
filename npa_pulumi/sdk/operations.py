"""The SDK's operations: a selected fleet and one typed request in, a `FleetResult` out.

    selected = select("fleet.yaml", Selection(shard="1/4"))   # the spec read, the selection resolved once
    result = deploy(selected, UpRequest(selection=selection))

Each operation takes the spec (a FleetSpec, a path, or what `select` returned) and its request. Nothing
prompts: calling an operation is the confirmation, unless `approve` is given: it is called once, after
every offline and read-only check and before the first change, with what is about to change (the CLI asks a
person there); raising from it stops the operation with nothing changed.

What a run leaves to do again is a `Retry` (the operation and its request) on the result: `stack.retry`,
`phase.retry`, `result.resume`. `render_retry` (deploy, adopt, destroy, cleanup) spells it wherever text is
shown or stored (`retry_command`, `resume_command`, the stack tags and receipts `status` reads elsewhere);
without one that text is the neutral `describe` form (npa_pulumi/engine/retries.py). The CLI passes its
command-line renderer (npa_pulumi/cli/retry_commands.py), which a Python caller may pass too.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.output.results import FleetResult, TeardownPhase
from npa_pulumi.plan import Target, resolve_targets
from npa_pulumi.sdk.audit import recorded, recorded_remediation, recorded_requalify
from npa_pulumi.sdk.requests import (
    AdoptRequest,
    AttestRequest,
    CleanupRequest,
    DestroyRequest,
    FleetRequest,
    GraphicsVerifyRequest,
    HealthRequest,
    MigVerifyRequest,
    PreviewRequest,
    RefreshRequest,
    RenderRetry,
    Selection,
    StatusRequest,
    UpRequest,
    VerifyRequest,
)
from npa_pulumi.spec import FleetSpec, load_spec

if TYPE_CHECKING:
    from npa_pulumi.engine.operations.verify import Verifier
    from npa_pulumi.engine.orchestrator import Fleet
    from npa_pulumi.output.health import FleetHealth
    from npa_pulumi.preflight.report import PreflightReport


@dataclass(frozen=True)
class Selected:
    """A spec and the targets a selection resolved to (a shard's share of them, with a shard)."""

    spec: FleetSpec
    targets: list[Target]
    selection: Selection = field(default_factory=Selection)
    spec_path: str | None = None  # the file it was read from, for exact retry commands


@dataclass(frozen=True)
class Approval:
    """What an operation is about to change, for whoever approves it: `action` (deploy, destroy, clean
    up), the fleet, its `spec` and the `targets` it changes (no spec: a receipt's guarded phases), the
    `phases` a destroy or cleanup will run (the ones approved are the ones that run), and the receipt a
    destroy continues."""

    action: str
    fleet: str
    spec: FleetSpec | None
    targets: list[Target]
    phases: list[TeardownPhase] = field(default_factory=list)
    receipt_id: str | None = None


Approve = Callable[[Approval], None]
SpecSource = FleetSpec | str | Path | Selected


def select(spec: FleetSpec | str | Path, selection: Selection = Selection()) -> Selected:
    """Read the spec (unless it is one already) and resolve the selection: its projects, clusters and
    prefix, then the shard's share. The selection checked itself when it was made, so bad input fails
    before the spec is read."""
    fleet = spec if isinstance(spec, FleetSpec) else load_spec(spec)
    targets = resolve_targets(
        fleet,
        list(selection.projects),
        list(selection.clusters),
        selection.prefix,
        checked=fleet is not spec,  # read from its file here: load_spec ran the rules
    )
    path = None if isinstance(spec, FleetSpec) else str(spec)
    return Selected(fleet, selection.owned(targets), selection, path)


def _selected(spec: SpecSource, selection: Selection) -> Selected:
    return spec if isinstance(spec, Selected) else select(spec, selection)


def check_cost_inputs(prices: str | None, policy_config: str | None) -> None:
    """Bad input before any engine run: a prices file (or $NPA_PRICES) that is no catalog, or a budget
    setting in the policy config that is no limit, is refused with where it is (exit 2)."""
    from npa_pulumi.plan.budget import budget_config
    from npa_pulumi.plan.prices import load_catalog

    load_catalog(prices)
    if policy_config:
        try:
            config = json.loads(Path(policy_config).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # the engine reports an unreadable policy config itself, as before
        budget_config(config, policy_config)


def open_fleet(selected: Selected, request: FleetRequest, render_retry: RenderRetry | None = None) -> Fleet:
    """The engine's façade over the selected targets, with the request's options; `render_retry` spells
    the retries it leaves (engine/retries.py; None: their neutral text)."""
    from npa_pulumi.engine.orchestrator import Fleet
    from npa_pulumi.engine.requests import policies, prices

    check_cost_inputs(prices(request), policies(request).config)
    return Fleet(selected.spec, selected.targets, request, selected.spec_path, render_retry=render_retry)


def empty_result(
    command: str, selected: Selected, request: FleetRequest, dry_run: bool = False
) -> FleetResult:
    """The result of an operation over an empty selection (a shard that owns no cluster): nothing ran."""
    from npa_pulumi.engine.automation import resolve_backend_url

    return FleetResult(
        command=command,
        fleet=selected.spec.name,
        cloud=request.where.cloud,
        backend=resolve_backend_url(request.where.backend),
        shard=selected.selection.shard,
        dry_run=dry_run,
    )


def deploy(
    spec: SpecSource,
    request: UpRequest = UpRequest(),
    approve: Approve | None = None,
    render_retry: RenderRetry | None = None,
) -> FleetResult:
    """`npa-pulumi up`: every offline check (recipes, tfvars), then the quota preflight (unless
    `request.preflight` is False; a failed report comes back in `result.preflight` and nothing deploys),
    then project stacks and their cluster stacks."""
    selected, held = _pins_held(_selected(spec, request.selection), request)
    fleet = open_fleet(selected, request, render_retry)
    fleet.plans_checked()  # every offline check (recipe, tfvars) before asking
    if approve is not None:
        approve(Approval("deploy", selected.spec.name, selected.spec, selected.targets))
    started = datetime.now(UTC)
    with fleet.progress:
        result = fleet.up()
    result.warnings[:0] = held
    return recorded(selected, request, fleet, started, result)  # the audit trail (sdk/audit.py)


def _pins_held(selected: Selected, request: FleetRequest) -> tuple[Selected, list[str]]:
    """`up` and `preview` hold a pinned pool that names no `version` where its node groups are: at the
    oldest version the cloud reports for them (docs/upgrades.md, *Pins*), so a `k8s_version` change moves
    the control plane and leaves the pool. Nothing is read unless a selected cluster has such a pin; one
    not deployed yet starts at its `k8s_version`. Returns the selection of that spec and one line per
    pool held."""
    from npa_pulumi.sdk import pools

    keys = {f"{t.project_key}/{t.cluster_name}" for t in selected.targets}
    wanted = set(pools.unversioned_pins(selected.spec, keys))
    if not wanted:
        return selected, []
    asked = StatusRequest(where=request.where, selection=request.selection, recipes=request.recipes)
    # Only those clusters' stacks are read (for their cluster ids), not the whole selection's.
    pinned = [t for t in selected.targets if f"{t.project_key}/{t.cluster_name}" in wanted]
    found = status(dataclasses.replace(selected, targets=pinned), asked)
    stacks = {f"{s.project_key}/{s.cluster_name}": s for s in found.clusters() if s.cluster_id}
    if not stacks:
        return selected, []
    reader = pools.CloudVersions(open_fleet(selected, request))
    try:
        live = reader(stacks)
    finally:
        reader.close()
    spec, held = pools.held_in_place(selected.spec, live)
    targets = select(spec, selected.selection).targets
    lines = [
        f"{where}: pinned with no version: held at {version}, where its node groups run (set its version to "
        "move it)"
        for where, version in sorted(held.items())
    ]
    return dataclasses.replace(selected, spec=spec, targets=targets), lines


def adopt(
    spec: SpecSource,
    request: AdoptRequest = AdoptRequest(),
    approve: Approve | None = None,
    render_retry: RenderRetry | None = None,
) -> FleetResult:
    """`npa-pulumi adopt`: read and prove the original tool's install of every selected cluster (its
    Terraform state and tfvars against the live cloud and the spec; nothing changes), then, unless
    `dry_run`, take them all over (all or nothing): project and cluster stacks that hold what exists, the
    health gate, kubeconfigs and registrations, a receipt (`result.receipt`). No cloud mutation, ever."""
    from npa_pulumi.engine.operations.adopt import default_source

    selected = _selected(spec, request.selection)
    source = Path(request.source).expanduser() if request.source else default_source(selected.spec.name)
    fleet = open_fleet(selected, request, render_retry)
    try:
        with fleet.progress:
            found = fleet.adoption_plan(source)  # read-only
    finally:
        if request.dry_run:
            fleet.close()
    adoptable = [s for s in found.stacks if s.status == "found"]
    if request.dry_run or found.failed_count or not adoptable:
        if not request.dry_run:
            fleet.close()
            found.dry_run = False
            if found.failed_count:
                found.error = "nothing was adopted: " + ", ".join(
                    f"{s.stack} ({s.status})" for s in found.stacks if s.failed
                )
        return found
    if approve is not None:
        chosen = {s.stack for s in adoptable}
        approve(
            Approval(
                "adopt",
                selected.spec.name,
                selected.spec,
                [t for t in selected.targets if t.cluster_stack in chosen],
            )
        )
    started = datetime.now(UTC)
    with fleet.progress:
        result = fleet.adopt(source)
    return recorded(selected, request, fleet, started, result)


def preview(spec: SpecSource, request: PreviewRequest = PreviewRequest()) -> FleetResult:
    """`npa-pulumi preview`: per-stack changes and policy results, changing nothing; each cluster whose
    Terraform inputs changed (every cluster with `refresh=True`) also carries Terraform's own plan
    (`StackResult.terraform`), and the result its cost delta."""
    selected, held = _pins_held(_selected(spec, request.selection), request)
    fleet = open_fleet(selected, request)
    with fleet.progress:
        result = fleet.preview()
    result.warnings[:0] = held
    return result


def destroy(
    spec: SpecSource,
    request: DestroyRequest = DestroyRequest(),
    approve: Approve | None = None,
    render_retry: RenderRetry | None = None,
) -> FleetResult:
    """`npa-pulumi destroy`: cluster stacks, then project stacks once none of their clusters remain, then
    the opt-in, ownership-gated bucket, storage identity and project phases; `dry_run` only plans them.
    The result's `phases` say what each phase did (or would do) and why; `receipt` and `receipt_id` name
    the receipt. `partial_cleanup` (`outcome == "partial-cleanup"`) means something asked for is left; its
    `resume` (the retry `destroy --receipt ID`; `resume_command` its text) continues it."""
    selected = _selected(spec, request.selection)
    fleet = open_fleet(selected, request, render_retry)
    if request.dry_run or approve is not None:
        with fleet.progress:
            plan = fleet.teardown_plan()  # read-only
        if request.dry_run:
            return plan
        assert approve is not None
        approve(Approval("destroy", selected.spec.name, selected.spec, selected.targets, plan.phases))
    started = datetime.now(UTC)
    with fleet.progress:
        result = fleet.destroy()
    return recorded(selected, request, fleet, started, result)


def cleanup(
    spec: SpecSource,
    request: CleanupRequest = CleanupRequest(),
    approve: Approve | None = None,
    render_retry: RenderRetry | None = None,
) -> FleetResult:
    """`npa-pulumi cleanup --spec`: what the fleet created (by its labels) that no stack references any
    more, deleted through destroy's guarded phases; the plan alone with `dry_run` or nothing to delete."""
    selected = _selected(spec, request.selection)
    fleet = open_fleet(selected, request, render_retry)
    with fleet.progress:
        plan = fleet.cleanup_plan()  # read-only
    # Nothing to delete and nothing refused: the plan is the answer. A refusal runs (and is receipted):
    # a deletion that was asked for and not proved is a partial cleanup, never a plan that exits 0.
    if request.dry_run or not any(p.status in ("planned", "refused") for p in plan.phases):
        return plan
    if approve is not None:
        approve(Approval("clean up", selected.spec.name, selected.spec, [], plan.phases))
    started = datetime.now(UTC)
    with fleet.progress:
        result = fleet.cleanup()
    return recorded(selected, request, fleet, started, result)


def attest_storage_account(spec: SpecSource, request: AttestRequest) -> dict[str, Any]:
    """`npa-pulumi reconcile storage-account --attest-npa-created`: the teardown guide's legacy evidence for
    a storage service account no record proves the fleet created (engine/teardown/attestations.py)."""
    from npa_pulumi.engine.teardown.attestations import attest_storage_account as attest

    selected = _selected(spec, request.selection)
    fleet = open_fleet(selected, request)
    try:
        return attest(fleet.context, request.project_key, request.account_id, request.reason, request.dry_run)
    finally:
        fleet.close()


def status(spec: SpecSource, request: StatusRequest = StatusRequest()) -> FleetResult:
    """`npa-pulumi status`: stack outputs checked against the live cloud, and what it costs."""
    fleet = open_fleet(_selected(spec, request.selection), request)
    with fleet.progress:
        return fleet.status()


def refresh(spec: SpecSource, request: RefreshRequest = RefreshRequest()) -> FleetResult:
    """`npa-pulumi refresh`: drift per stack, recorded in the stacks' state."""
    fleet = open_fleet(_selected(spec, request.selection), request)
    with fleet.progress:
        return fleet.refresh()


def verify_mig(spec: SpecSource, request: MigVerifyRequest = MigVerifyRequest()) -> FleetResult:
    """`npa-pulumi verify-mig`: MIG readiness of the selected MIG clusters through their registered
    kubeconfigs; `reconcile` makes the repairs the findings call for (see
    npa_pulumi.engine.verification.verifiers), a repair: the run appends an audit record (sdk/audit.py)."""
    from npa_pulumi.engine.operations.verify import Verifier

    if not request.reconcile:
        return _verify(Verifier.MIG, spec, request)
    selected = _selected(spec, request.selection)
    fleet = open_fleet(selected, request)
    started = datetime.now(UTC)
    result = fleet.verify(Verifier.MIG)
    return recorded(selected, request, fleet, started, result, repair="reconcile")


def verify_graphics(spec: SpecSource, request: VerifyRequest = GraphicsVerifyRequest()) -> FleetResult:
    """`npa-pulumi verify-graphics`: CUDA and GLX/EGL/Vulkan on every GPU worker of the selected RTX
    rendering clusters, through their registered kubeconfigs; with `reconcile` (a GraphicsVerifyRequest),
    the repairs the findings call for first (see npa_pulumi.engine.verification.verifiers)."""
    from npa_pulumi.engine.operations.verify import Verifier

    return _verify(Verifier.GRAPHICS, spec, request)


def verify_storage(spec: SpecSource, request: VerifyRequest = VerifyRequest()) -> FleetResult:
    """`npa-pulumi verify-storage`: the shared filesystem's mount on every worker and one RWX claim shared
    by all of them, through the registered kubeconfigs (see npa_pulumi.engine.verification.verifiers)."""
    from npa_pulumi.engine.operations.verify import Verifier

    return _verify(Verifier.STORAGE, spec, request)


def verify_fabric(spec: SpecSource, request: VerifyRequest = VerifyRequest()) -> FleetResult:
    """`npa-pulumi verify-fabric`: NCCL all-reduce bus bandwidth on every GPU node and across the
    InfiniBand fabric of the selected clusters (see npa_pulumi.engine.verification.fabric)."""
    from npa_pulumi.engine.operations.verify import Verifier

    return _verify(Verifier.FABRIC, spec, request)


def health(
    spec: SpecSource,
    request: HealthRequest = HealthRequest(),
    on_report: Callable[[FleetHealth], None] | None = None,
) -> FleetHealth:
    """`npa-pulumi health`: each selected cluster's nodes (Ready, Nebius' conditions, cordon and taints,
    GPUs against the preset, qualified or not) and its project's active maintenance events, with GPU totals;
    `requalify` runs the gate's per-node probes on the unqualified nodes (see
    npa_pulumi.engine.operations.health): a repair, which appends an audit record. Calling it with
    `requalify` is the confirmation. With `watch`,
    the read repeats (metrics, events: npa_pulumi.engine.health.watch), `on_report` gets each report, and the
    last one is returned."""
    from npa_pulumi.engine.health.watch import watch

    selected = _selected(spec, request.selection)

    def read() -> FleetHealth:
        fleet = open_fleet(selected, request)  # a fresh read of the stacks each time
        started = datetime.now(UTC)
        report = fleet.health()
        if request.remediate and request.watch is not None:  # the ladder acted: its audit record
            report = recorded_remediation(selected, request, fleet, started, report)
        return report

    if request.requalify:  # a repair (never with watch): its audit record (sdk/audit.py)
        fleet = open_fleet(selected, request)
        started = datetime.now(UTC)
        report = recorded_requalify(selected, request, fleet, started, fleet.health())
        if on_report is not None:
            on_report(report)
        return report
    if request.watch is None:
        report = read()
        if on_report is not None:
            on_report(report)
        return report
    return watch(read, request.watch, on_report or (lambda _r: None))


def reset_breaker(spec: SpecSource, scope: str, request: FleetRequest = FleetRequest()) -> dict[str, Any]:
    """`npa-pulumi health breaker reset --scope S [--shard K/N]`: close one open circuit breaker of the
    fleet's repair ladder (npa_pulumi.engine.health.ledger): in shard K/N's ledger, or in every ledger of
    the fleet where it is open. Refused (ResetRefused, exit 1) when the caller's identity (the
    cloud's principal, else the OS user at the host) is the watcher's that tripped it: closing a breaker
    takes a person. Appends an audit record beside the stacks."""
    from npa_pulumi.engine.health import ledger
    from npa_pulumi.sdk.audit import caller, recorded_breaker_reset

    selected = _selected(spec, request.selection)
    fleet = open_fleet(selected, request)
    started = datetime.now(UTC)
    who = caller(request, fleet)
    shard = request.selection.shard  # that shard's ledger; none: every ledger where the scope is open
    opened_by, closed = ledger.reset_breaker(selected.spec.name, scope, who.identity, shard=shard)
    document: dict[str, Any] = {"command": "health breaker reset", "fleet": selected.spec.name}
    document |= {"breaker": closed.to_json(), "by": who.identity, "breaker_opened_by": opened_by}
    document["warnings"] = recorded_breaker_reset(selected, fleet, who, started, scope)
    return document


def _verify(verifier: Verifier, spec: SpecSource, request: VerifyRequest) -> FleetResult:
    return open_fleet(_selected(spec, request.selection), request).verify(verifier)


def kubeconfigs(spec: SpecSource, request: FleetRequest = FleetRequest()) -> list[dict[str, str]]:
    """One entry per selected cluster: `stack`, `context`, and `kubeconfig` when it is deployed. A
    registration that no longer matches its stack or the live cloud raises StaleRegistration."""
    from npa_pulumi.engine.registrations.kubeconfigs import StaleRegistration

    entries = open_fleet(_selected(spec, request.selection), request).kubeconfigs()
    stale = [e["error"] for e in entries if e.get("error")]
    if stale:
        raise StaleRegistration("\n".join(stale))
    return entries


def preflight(spec: SpecSource, request: FleetRequest = FleetRequest()) -> PreflightReport:
    """`npa-pulumi preflight`: whether the tenant's quota and reserved capacity fit the selection
    (read-only); the recipe's terraform/tofu is checked first, as `up` does."""
    return open_fleet(_selected(spec, request.selection), request).preflight()


def list_stacks(backend: str | None = None, fleet: str | None = None) -> list[dict[str, Any]]:
    """The fleet stacks in a backend with their npa tags (`pulumi stack ls`); `fleet`: only its stacks."""
    from npa_pulumi.engine.automation import list_fleet_stacks

    return list_fleet_stacks(backend, fleet)


__all__ = [
    "Approval",
    "Approve",
    "Selected",
    "attest_storage_account",
    "check_cost_inputs",
    "cleanup",
    "deploy",
    "destroy",
    "empty_result",
    "health",
    "kubeconfigs",
    "list_stacks",
    "open_fleet",
    "preflight",
    "preview",
    "refresh",
    "select",
    "status",
    "verify_fabric",
    "verify_graphics",
    "verify_mig",
    "verify_storage",
]
