"""The fleet's cost in a preview (before and after the change) and in `status` (what is deployed now).

Before is what each stack recorded as its `cost_basis` output when it was deployed (plan/cost.py), priced
with the catalog in use now, so a negotiated price moves both sides alike; a stack that does not exist yet
costs nothing before, and a deployed stack that is no longer in the spec costs nothing after (its saving).
After is the spec's. The sums and the budget guardrail are pure (plan/cost_delta.py, plan/budget.py).
"""

from __future__ import annotations

import json
import logging
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.automation import StackOp, stack_names
from npa_pulumi.engine.requests import policies, prices
from npa_pulumi.errors import NpaError
from npa_pulumi.output.results import FleetResult, PolicyViolation
from npa_pulumi.output.stack_outputs import ClusterOutputs
from npa_pulumi.plan.budget import BudgetConfig, budget_config, check_budget
from npa_pulumi.plan.cost import (
    Cost,
    CostBasis,
    LineKind,
    combine,
    money,
    price_basis,
)
from npa_pulumi.plan.cost_delta import StackDelta, stack_delta, summarize
from npa_pulumi.plan.prices import PriceCatalog, load_catalog
from npa_pulumi.plan.shards import parse_shard, select_shard
from npa_pulumi.plan.targets import resolve_targets

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext

log = logging.getLogger(__name__)


def _op(stack: str, kind: str, project_key: str, cluster: str | None) -> StackOp:
    return StackOp(stack, "cluster" if kind == "cluster" else "project", project_key, cluster, None, {})


def _recorded(outputs: dict[str, Any] | None) -> tuple[CostBasis | None, bool]:
    """(the basis a stack recorded, whether its past is known): a stack that does not exist, or exists
    without a deployment, is known to cost nothing; a deployed one without a basis is unknown."""
    if not outputs:
        return None, True
    recorded = ClusterOutputs.read(outputs)  # a project stack's reads the same: what both record
    basis = recorded.basis()
    deployed = recorded.deployed_by_fleet or bool(recorded.cluster_id or recorded.project_id)
    return basis, basis is not None or not deployed


def _before(outputs: dict[str, Any] | None, catalog: PriceCatalog) -> tuple[Cost | None, bool]:
    basis, known = _recorded(outputs)
    return (price_basis(basis, catalog) if basis else None), known


def _spec_stacks(fleet: FleetContext) -> set[str] | None:
    """Every stack the spec has, when this run covers all of its clusters (its shard's share, with
    --shard); None for a narrower selection (--only-projects / --only-clusters), which cannot tell a stack
    the spec dropped from one outside the selection."""
    selection = fleet.request.selection
    if not (selection.projects or selection.clusters or selection.prefix or fleet.share.shard):
        everything = list(fleet.targets)  # the whole spec already (resolving it again: ~0.7 s at 10,000)
    else:
        everything = resolve_targets(fleet.spec, checked=True)  # checked when the run selected its targets
    share = select_shard(everything, parse_shard(fleet.share.shard)) if fleet.share.shard else everything
    if {t.cluster_stack for t in share} != {t.cluster_stack for t in fleet.targets}:
        return None
    return {stack for t in everything for stack in (t.project_stack, t.cluster_stack)}


def _backend_stacks(fleet: FleetContext) -> list[str]:
    names = stack_names(fleet.settings.backend_url, engine=fleet.settings)
    prefix = f"{fleet.spec.name}."
    return [name for name in names if name.startswith(prefix)]


def _removed(fleet: FleetContext, known: set[str], catalog: PriceCatalog) -> list[StackDelta]:
    """Deployed stacks of this fleet that the spec no longer has: after is zero. Every shard reports them
    (`preview-merge` counts each once)."""
    in_spec = _spec_stacks(fleet)
    if in_spec is None:
        return []
    accounted = known | in_spec
    try:
        names = [name for name in _backend_stacks(fleet) if name not in accounted]
    except NpaError as err:
        log.warning("cost: the backend's stacks could not be listed: %s", err)
        return []
    ops = []
    for name in sorted(names):
        parts = name.removeprefix(f"{fleet.spec.name}.").split(".")
        kind = "cluster" if len(parts) == 2 else "project"
        if fleet.share.stage and fleet.share.stage != f"{kind}s":
            continue  # --stage: only that half of the fleet
        ops.append(_op(name, kind, parts[0], parts[1] if kind == "cluster" else None))
    outputs = fleet.stack_outputs(ops)
    deltas = []
    for op in ops:
        before, recorded = _before(outputs.get(op.stack), catalog)
        if before is None and recorded:
            continue  # an empty stack (never deployed): nothing to save
        deltas.append(
            stack_delta(
                op.stack, op.kind, op.project_key, op.cluster_name, before, None, past_recorded=recorded
            )
        )
    return deltas


def _policy_config(fleet: FleetContext) -> BudgetConfig:
    path = policies(fleet.request).config
    if not path:
        return BudgetConfig()
    try:
        config = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return BudgetConfig()  # the engine reports an unreadable config itself
    return budget_config(config, path)


def catalog_of(fleet: FleetContext) -> PriceCatalog:
    return load_catalog(prices(fleet.request))


def over_budget(fleet: FleetContext, result: FleetResult) -> bool:
    """`up`'s budget gate, before any change: with a limit configured, the cost delta and the guardrail's
    verdict go into `result`; True (and `result.error`) when a mandatory budget is exceeded."""
    if not _policy_config(fleet).active:
        return False
    # `up` never destroys a stack the spec dropped, so its saving does not offset an increase here.
    preview_cost(fleet, result, include_removed=False)
    mandatory = [v for v in result.policy if v.level.lower() == "mandatory"]
    if mandatory:
        result.error = (
            f"{mandatory[0].policy} (mandatory): {mandatory[0].message} Nothing was created or changed."
        )
    return bool(mandatory)


def preview_cost(fleet: FleetContext, result: FleetResult, include_removed: bool = True) -> None:
    """Attach the cost delta of this preview to `result`, and the budget guardrail's verdict. A deployed
    stack the spec no longer has is counted as removed (its saving, once it is destroyed) unless
    `include_removed` is False."""
    catalog = catalog_of(fleet)
    plans = fleet.plans()
    wanted: list[tuple[StackOp, dict[str, Any]]] = []
    if fleet.share.stage != "clusters":
        wanted += [(_op(p.stack, "project", p.project_key, None), p.cost_basis) for p in plans.projects]
    if fleet.share.stage != "projects":
        wanted += [
            (_op(c.stack, "cluster", c.project_key, c.cluster_name), c.cost_basis) for c in plans.clusters
        ]
    outputs = fleet.stack_outputs([op for op, _ in wanted])
    deltas = []
    for op, basis in wanted:
        before, recorded = _before(outputs.get(op.stack), catalog)
        after = price_basis(CostBasis.model_validate(basis), catalog)
        deltas.append(
            stack_delta(
                op.stack, op.kind, op.project_key, op.cluster_name, before, after, past_recorded=recorded
            )
        )
    known = {s.stack for s in result.stacks} | {op.stack for op, _ in wanted}
    if include_removed:
        deltas += _removed(fleet, known, catalog)
    config = _policy_config(fleet)
    result.cost = summarize(deltas, catalog.describe(), config.to_json() if config.active else None)
    result.policy.extend(PolicyViolation(**v) for v in check_budget(result.cost, config))


def status_cost(fleet: FleetContext, result: FleetResult) -> None:
    """What the deployed fleet costs now, from what its stacks recorded: per project and cluster (a price
    catalog that cannot be read is a warning: the status stands)."""
    try:
        _status_cost(fleet, result)
    except NpaError as err:
        result.warnings.append(f"what the fleet costs is not shown: {err}")


def _status_cost(fleet: FleetContext, result: FleetResult) -> None:
    catalog = catalog_of(fleet)
    projects: dict[str, list[tuple[str, str | None, StackOp]]] = {}
    for target in fleet.targets:
        entries = projects.setdefault(target.project_key, [])
        if not entries:
            entries.append(
                (target.project_stack, None, _op(target.project_stack, "project", target.project_key, None))
            )
        op = _op(target.cluster_stack, "cluster", target.project_key, target.cluster_name)
        entries.append((target.cluster_stack, target.cluster_name, op))
    outputs = fleet.stack_outputs([op for entries in projects.values() for _, _, op in entries])
    unrecorded: list[str] = []
    project_docs, project_costs = [], []
    for key, entries in projects.items():
        stacks_doc, parts = [], []
        for stack, cluster, _ in entries:
            before, recorded = _before(outputs.get(stack), catalog)
            if not recorded:
                unrecorded.append(stack)
            cost = before or Cost()
            parts.append((stack, cost))
            stacks_doc.append(
                {"stack": stack, "cluster_name": cluster, "recorded": recorded, "cost": cost.to_json()}
            )
        total = combine(parts)
        project_costs.append((key, total))
        project_docs.append({"project_key": key, "cost": total.to_json(), "stacks": stacks_doc})
    fleet_cost = combine(project_costs, LineKind.PROJECT)
    result.cost = {
        **fleet_cost.to_json(),
        "prices": catalog.describe(),
        "projects": project_docs,
        "unrecorded": unrecorded,
    }


_SAVING_PHASES = {"cluster": "cluster", "bucket": "project"}  # phase -> the stack whose basis it removes


def teardown_cost(fleet: FleetContext, result: FleetResult) -> None:
    """What a destroy saves (`destroy --dry-run`: would save): the recorded cost of every cluster stack it
    deletes, and of every bucket it deletes (a plain destroy retains buckets, whose cost goes on). Runs
    after the deletes: a price catalog that cannot be read is a warning, never a failed destroy."""
    try:
        _teardown_cost(fleet, result)
    except NpaError as err:
        result.warnings.append(f"what this destroy saves is not shown: {err}")


def _teardown_cost(fleet: FleetContext, result: FleetResult) -> None:
    catalog = catalog_of(fleet)
    wanted = [p for p in result.phases if p.phase in _SAVING_PHASES and p.status in ("planned", "done")]
    if not wanted:
        return
    ops = [
        _op(
            p.stack,
            _SAVING_PHASES[p.phase],
            p.project_key,
            p.stack.rsplit(".", 1)[-1] if p.phase == "cluster" else None,
        )
        for p in wanted
    ]
    outputs = fleet.stack_outputs(ops)  # read by the teardown's plan: cached, from before the deletes
    deltas = []
    for op, phase in zip(ops, wanted, strict=True):
        basis, recorded = _recorded(outputs.get(op.stack))
        if phase.phase == "bucket" and basis is not None:
            basis = CostBasis(region=basis.region, buckets=basis.buckets)
        before = price_basis(basis, catalog) if basis else None
        if before is None and recorded:
            continue
        deltas.append(
            stack_delta(
                op.stack, op.kind, op.project_key, op.cluster_name, before, None, past_recorded=recorded
            )
        )
    cost = summarize(deltas, catalog.describe())
    verb = "would save" if result.dry_run else "saves"
    cost["headline"] = f"this destroy {verb} {money(-Decimal(str(cost['diff_monthly_usd'])))} a month"
    result.cost = cost
