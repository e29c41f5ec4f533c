"""`npa-pulumi preview-merge`: the JSON documents of `preview --shard K/N --output json` (one per CI job)
combined into the one result an unsharded preview of the fleet would have given, so the pull request gets
one comment (output/markdown.py renders it, within the comment limit) and one JSON artifact.

What is combined, and why:
* cluster stacks: each belongs to exactly one shard; one seen twice means overlapping documents (the same
  shard given twice, or shards of different counts) and is refused rather than guessed;
* project stacks: every shard with a cluster in a project previews its project stack; they previewed the
  same plan, so one entry is kept, the most telling one (failed, then changes, then the rest);
* every shard 1..N must be there (documents carry `shard`), since a missing shard would silently drop its
  clusters from the comment;
* preflight: a shard budgets only its own clusters against the whole quota, so per-shard reports cannot be
  added up (two shards can each fit while the fleet does not). A whole-fleet report (`npa-pulumi
  preflight --output json`) can be given instead; otherwise the merged preview says preflight did not run;
* order: the spec's, when given (what the unsharded preview shows); else the documents' order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from npa_pulumi.errors import UserInputError
from npa_pulumi.output.results import FleetResult, PolicyViolation, StackResult
from npa_pulumi.plan.budget import BUDGET_POLICY, BudgetConfig, check_budget
from npa_pulumi.plan.cost_delta import Change, StackDelta, deltas_from_document, summarize
from npa_pulumi.plan.shards import ShardError, parse_shard


class MergeRefused(UserInputError):
    kind = "invalid-preview-documents"


@dataclass(frozen=True)
class PreviewDocument:
    name: str  # where it came from (a file name), for messages
    body: Any


_RANK = {"failed": 0, "changes": 1}  # which of several previews of one project stack is kept


def _result(document: PreviewDocument) -> FleetResult:
    body = document.body
    if not isinstance(body, dict) or body.get("command") != "preview":
        found = body.get("command") if isinstance(body, dict) else type(body).__name__
        raise MergeRefused(
            f"{document.name}: not the JSON of `npa-pulumi preview --output json` (command: {found!r})"
        )
    try:
        return FleetResult.from_json(body)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise MergeRefused(f"{document.name}: not a preview document: {where}: {first['msg']}") from None


def _same(results: list[tuple[str, FleetResult]], field: str) -> str:
    values = {str(getattr(result, field)) for _name, result in results}
    if len(values) > 1:
        listing = ", ".join(f"{name}: {getattr(result, field)}" for name, result in results)
        raise MergeRefused(f"the documents are of different {field}s ({listing}): merge one fleet's shards")
    return values.pop()


def _check_shards(results: list[tuple[str, FleetResult]]) -> None:
    """Every shard 1..N exactly once, all of the same N; or a single unsharded document."""
    if len(results) == 1 and not results[0][1].shard:
        return
    shards = []
    for name, result in results:
        if not result.shard:
            raise MergeRefused(f"{name}: an unsharded preview; merge the documents of `preview --shard K/N`")
        try:
            shards.append((name, parse_shard(result.shard)))
        except ShardError as err:
            raise MergeRefused(f"{name}: {err}") from None
    counts = {shard.count for _name, shard in shards}
    if len(counts) > 1:
        raise MergeRefused(f"shards of different counts ({', '.join(f'{n}: {s}' for n, s in shards)})")
    count = counts.pop()
    seen: dict[int, str] = {}
    for name, shard in shards:
        if shard.index in seen:
            raise MergeRefused(f"shard {shard} is given twice ({seen[shard.index]}, {name})")
        seen[shard.index] = name
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in seen]
    if missing:
        raise MergeRefused(
            f"shard(s) {', '.join(missing)} missing: every shard's document is needed, or their clusters "
            "would be left out of the preview"
        )


def _combine_stacks(results: list[tuple[str, FleetResult]]) -> list[StackResult]:
    kept: dict[str, tuple[str, StackResult]] = {}
    for name, result in results:
        for stack in result.stacks:
            if stack.stack not in kept:
                kept[stack.stack] = (name, stack)
                continue
            first, existing = kept[stack.stack]
            if stack.kind != "project":
                raise MergeRefused(
                    f"cluster stack {stack.stack} is in both {first} and {name}: the documents overlap"
                )
            if _RANK.get(stack.status, 2) < _RANK.get(existing.status, 2):
                kept[stack.stack] = (name, stack)
    return [stack for _name, stack in kept.values()]


def _ordered(stacks: list[StackResult], order: Sequence[str] | None) -> list[StackResult]:
    """As an unsharded preview lists them: unsupported clusters, project stacks, cluster stacks, each in
    spec order when it is known."""
    position = {stack: index for index, stack in enumerate(order or [])}

    def key(item: tuple[int, StackResult]) -> tuple[int, int, int]:
        index, stack = item
        group = 0 if stack.status == "not-supported" else (1 if stack.kind == "project" else 2)
        return group, position.get(stack.stack, len(position)), index

    return [stack for _index, stack in sorted(enumerate(stacks), key=key)]


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _merge_cost(merged: FleetResult, results: list[tuple[str, FleetResult]]) -> None:
    """The shards' per-stack cost deltas summed again (a project stack, or a removed stack that every shard
    saw, counted once), and the budget guardrail judged on the merged totals, as an unsharded run does."""
    costs = [result.cost for _name, result in results if result.cost]
    if not costs:
        return
    seen: dict[str, StackDelta] = {}
    for cost in costs:
        for delta in deltas_from_document(cost):
            kept = seen.get(delta.stack)
            # The shard that previewed a stack knows it best; another can only have seen it as not its own.
            if kept is None or (kept.change is Change.REMOVED and delta.change is not Change.REMOVED):
                seen[delta.stack] = delta
    order = {stack.stack: index for index, stack in enumerate(merged.stacks)}
    deltas = sorted(seen.values(), key=lambda d: (order.get(d.stack, len(order)), d.stack))
    budget = next((cost["budget"] for cost in costs if cost.get("budget")), None)
    merged.cost = summarize(deltas, costs[0].get("prices") or {}, budget)
    config = BudgetConfig.from_json(budget)
    merged.policy = [v for _name, result in results for v in result.policy if v.policy != BUDGET_POLICY]
    if config is not None:
        merged.policy += [PolicyViolation(**v) for v in check_budget(merged.cost, config)]


def merge_previews(
    documents: Sequence[PreviewDocument],
    order: Sequence[str] | None = None,
    preflight: dict[str, Any] | None = None,
) -> FleetResult:
    """One preview result from the shards' documents (see the module's docstring); `order` lists stack
    names in spec order, `preflight` is a whole-fleet preflight report."""
    if not documents:
        raise MergeRefused("no preview documents given: pass the JSON files of `preview --shard K/N`")
    results = [(document.name, _result(document)) for document in documents]
    fleet = _same(results, "fleet")
    merged = FleetResult(
        command="preview", fleet=fleet, cloud=_same(results, "cloud"), backend=_same(results, "backend")
    )
    _check_shards(results)
    merged.stacks = _ordered(_combine_stacks(results), order)
    merged.warnings = _unique([w for _name, result in results for w in result.warnings])
    errors = _unique([result.error for _name, result in results if result.error])
    merged.error = "; ".join(errors) or None
    _merge_cost(merged, results)
    reports = [result.preflight for _name, result in results if result.preflight is not None]
    if preflight is not None:
        merged.preflight = preflight
    elif len(results) == 1:
        merged.preflight = results[0][1].preflight
    elif reports:
        merged.warnings.append(
            "the shards' preflight reports each cover one shard and are not combined: pass a whole-fleet "
            "report (`npa-pulumi preflight --output json`) with --preflight"
        )
    if len(results) == 1:  # each shard's waves cover its own clusters only: never combined
        merged.rollout = results[0][1].rollout
    return merged
