"""What a change costs: each stack's monthly cost before (what it recorded when it was deployed, priced with
today's catalog) and after (the spec), their differences, and the fleet's totals.

Pure: the engine builds one `StackDelta` per stack (engine/costs.py); `preview-merge` reads them back from
the shards' JSON and sums them again with `summarize`, so a sharded preview totals what an unsharded one does.
Reserved (capacity-block) figures are summed apart and never enter the on-demand totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from npa_pulumi.plan.cost import ZERO, Cost, CostLine, money, usd
from npa_pulumi.plan.prices import HOURS_PER_MONTH


class Change(StrEnum):
    ADDED = "added"  # a new stack (nothing deployed yet): before is zero
    REMOVED = "removed"  # deployed, no longer in the spec: after is zero (its saving)
    CHANGED = "changed"
    UNCHANGED = "unchanged"


def _decimal(value: Any) -> Any:
    return Decimal(str(value)) if isinstance(value, float) else value


class LineDelta(BaseModel):
    """One line of a stack whose price changed (None: not priced on that side, or not there)."""

    model_config = ConfigDict(extra="ignore")

    item: str
    description: str
    pricing: str | None = None
    change: Change
    past_monthly_usd: Decimal | None = None
    monthly_usd: Decimal | None = None

    _money = field_validator("past_monthly_usd", "monthly_usd", mode="before")(_decimal)

    @property
    def diff_monthly_usd(self) -> Decimal | None:
        if self.past_monthly_usd is None and self.monthly_usd is None:
            return None
        return (self.monthly_usd or ZERO) - (self.past_monthly_usd or ZERO)

    def to_json(self) -> dict[str, Any]:
        diff = self.diff_monthly_usd
        return {
            "item": self.item,
            "description": self.description,
            "pricing": self.pricing,
            "change": self.change.value,
            "past_monthly_usd": None if self.past_monthly_usd is None else usd(self.past_monthly_usd),
            "monthly_usd": None if self.monthly_usd is None else usd(self.monthly_usd),
            "diff_monthly_usd": None if diff is None else usd(diff),
        }


class StackDelta(BaseModel):
    """One stack's cost before and after, as figures (what a preview's JSON carries per stack)."""

    model_config = ConfigDict(extra="ignore")

    stack: str
    kind: str  # project | cluster
    project_key: str
    cluster_name: str | None = None
    change: Change
    past_recorded: bool = True  # False: a deployed stack that recorded no cost basis (before is unknown)
    past_monthly_usd: Decimal = ZERO
    monthly_usd: Decimal = ZERO
    past_reserved_monthly_usd: Decimal = ZERO
    reserved_monthly_usd: Decimal = ZERO
    unknown: list[dict[str, str]] = Field(default_factory=list)  # not priced after the change
    lines: list[LineDelta] = Field(default_factory=list)  # the lines whose price changed

    _money = field_validator(
        "past_monthly_usd",
        "monthly_usd",
        "past_reserved_monthly_usd",
        "reserved_monthly_usd",
        mode="before",
    )(_decimal)

    @property
    def diff_monthly_usd(self) -> Decimal:
        return self.monthly_usd - self.past_monthly_usd

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "kind": self.kind,
            "project_key": self.project_key,
            "cluster_name": self.cluster_name,
            "change": self.change.value,
            "past_recorded": self.past_recorded,
            "past_monthly_usd": usd(self.past_monthly_usd),
            "monthly_usd": usd(self.monthly_usd),
            "diff_monthly_usd": usd(self.diff_monthly_usd),
            "past_reserved_monthly_usd": usd(self.past_reserved_monthly_usd),
            "reserved_monthly_usd": usd(self.reserved_monthly_usd),
            "unknown": self.unknown,
            "lines": [line.to_json() for line in self.lines],
        }


def _by_item(cost: Cost | None) -> dict[str, CostLine]:
    if cost is None:
        return {}
    return {line.item: line for line in (*cost.lines, *cost.reserved_lines)}


def _unknown_items(cost: Cost | None) -> dict[str, str]:
    if cost is None:
        return {}
    return {item.item: item.description for item in (*cost.unknown, *cost.reserved_unknown)}


def _line_deltas(before: Cost | None, after: Cost | None) -> list[LineDelta]:
    past, new = _by_item(before), _by_item(after)
    past_unknown, new_unknown = _unknown_items(before), _unknown_items(after)
    items = list(dict.fromkeys([*past, *past_unknown, *new, *new_unknown]))
    deltas = []
    for item in items:
        old_line, new_line = past.get(item), new.get(item)
        there_before = item in past or item in past_unknown
        there_after = item in new or item in new_unknown
        old_value = old_line.monthly_usd if old_line else None
        new_value = new_line.monthly_usd if new_line else None
        old_text = old_line.description if old_line else past_unknown.get(item)
        new_text = new_line.description if new_line else new_unknown.get(item)
        if there_before and there_after and old_value == new_value and old_text == new_text:
            continue
        change = (
            Change.CHANGED
            if there_before and there_after
            else (Change.ADDED if there_after else Change.REMOVED)
        )
        shown = new_line or old_line
        deltas.append(
            LineDelta(
                item=item,
                description=str(new_text or old_text or item),
                pricing=shown.pricing.value if shown and shown.pricing else None,
                change=change,
                past_monthly_usd=old_value,
                monthly_usd=new_value,
            )
        )
    return deltas


def stack_delta(
    stack: str,
    kind: str,
    project_key: str,
    cluster_name: str | None,
    before: Cost | None,
    after: Cost | None,
    *,
    past_recorded: bool = True,
) -> StackDelta:
    """`before` None: nothing deployed (or not recorded, with `past_recorded` False); `after` None: the
    stack is no longer in the spec."""
    if after is None:
        change = Change.REMOVED
    elif before is None and past_recorded:
        change = Change.ADDED
    else:
        change = Change.CHANGED
    lines = _line_deltas(before, after) if past_recorded else []
    if change is Change.CHANGED and past_recorded and not lines:
        change = Change.UNCHANGED
    return StackDelta(
        stack=stack,
        kind=kind,
        project_key=project_key,
        cluster_name=cluster_name,
        change=change,
        past_recorded=past_recorded,
        past_monthly_usd=before.monthly_usd if before else ZERO,
        monthly_usd=after.monthly_usd if after else ZERO,
        past_reserved_monthly_usd=before.reserved_monthly_usd if before else ZERO,
        reserved_monthly_usd=after.reserved_monthly_usd if after else ZERO,
        unknown=[item.to_json() for item in (*after.unknown, *after.reserved_unknown)] if after else [],
        lines=lines,
    )


# ----------------------------------------------------------------------------------------- totals


def percent(past: Decimal, diff: Decimal) -> float | None:
    """The change in percent of the past total; None when there was nothing before."""
    if past == 0:
        return None
    return float(round(diff * 100 / past, 1))


def headline(past: Decimal, diff: Decimal) -> str:
    """Infracost's headline: "monthly cost will increase by $40,880 (+212%)" / "will not change"."""
    if diff == 0:
        return "monthly cost will not change"
    verb = "increase" if diff > 0 else "decrease"
    share = percent(past, diff)
    suffix = f" ({share:+,.0f}%)" if share is not None else ""
    return f"monthly cost will {verb} by {money(abs(diff))}{suffix}"


def _totals(deltas: Iterable[StackDelta]) -> dict[str, Decimal]:
    items = list(deltas)
    return {
        "past": sum((d.past_monthly_usd for d in items), ZERO),
        "new": sum((d.monthly_usd for d in items), ZERO),
        "past_reserved": sum((d.past_reserved_monthly_usd for d in items), ZERO),
        "new_reserved": sum((d.reserved_monthly_usd for d in items), ZERO),
    }


def summarize(
    deltas: Sequence[StackDelta], prices: dict[str, Any], budget: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The `cost` document of a preview: totals, the headline, per project, per stack (fleet order)."""
    totals = _totals(deltas)
    diff = totals["new"] - totals["past"]
    projects: dict[str, list[StackDelta]] = {}
    for delta in deltas:
        projects.setdefault(delta.project_key, []).append(delta)
    reserved_diff = totals["new_reserved"] - totals["past_reserved"]
    return {
        "currency": "USD",
        "hours_per_month": int(HOURS_PER_MONTH),
        "prices": prices,
        "headline": headline(totals["past"], diff),
        "past_monthly_usd": usd(totals["past"]),
        "monthly_usd": usd(totals["new"]),
        "diff_monthly_usd": usd(diff),
        "diff_percent": percent(totals["past"], diff),
        "past_hourly_usd": usd(totals["past"] / HOURS_PER_MONTH),
        "hourly_usd": usd(totals["new"] / HOURS_PER_MONTH),
        "diff_hourly_usd": usd(diff / HOURS_PER_MONTH),
        "reserved": {
            "past_monthly_usd": usd(totals["past_reserved"]),
            "monthly_usd": usd(totals["new_reserved"]),
            "diff_monthly_usd": usd(reserved_diff),
        },
        "unknown_count": sum(len(d.unknown) for d in deltas),
        "unrecorded": [d.stack for d in deltas if not d.past_recorded],
        "projects": [_project(key, items) for key, items in projects.items()],
        "stacks": [d.to_json() for d in deltas],
        **({"budget": budget} if budget is not None else {}),
    }


def _project(key: str, deltas: list[StackDelta]) -> dict[str, Any]:
    totals = _totals(deltas)
    return {
        "project_key": key,
        "past_monthly_usd": usd(totals["past"]),
        "monthly_usd": usd(totals["new"]),
        "diff_monthly_usd": usd(totals["new"] - totals["past"]),
        "reserved_diff_monthly_usd": usd(totals["new_reserved"] - totals["past_reserved"]),
    }


def deltas_from_document(cost: dict[str, Any]) -> list[StackDelta]:
    """The per-stack entries of a preview's `cost` document (what `preview-merge` sums again)."""
    return [StackDelta.model_validate(entry) for entry in cost.get("stacks") or []]
