"""The `fleet-monthly-budget` guardrail: a change whose monthly increase, or a fleet whose monthly total,
exceeds a limit set in `--policy-config`.

A fleet-wide check cannot run inside CrossGuard: the pack judges one stack per engine run and never sees the
fleet's total or the other stacks' costs. So npa-pulumi evaluates it over the whole preview's cost delta
(and `preview-merge` again over the merged one), reads its level and limits from the same `--policy-config`
file, under the policy's name, as the pack's policies, and reports it as a policy result of the pack
(`policies/catalog.py` lists it). Advisory by default; mandatory makes the preview fail (exit 1).

    {"fleet-monthly-budget": {"enforcementLevel": "mandatory",
                              "monthly_increase_limit_usd": 10000, "monthly_total_limit_usd": 250000}}
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from npa_pulumi.errors import UserInputError
from npa_pulumi.plan.cost import money

BUDGET_POLICY = "fleet-monthly-budget"
PACK = "fleet-guardrails"
LEVELS = ("advisory", "mandatory", "remediate", "disabled")


@dataclass(frozen=True)
class BudgetConfig:
    level: str = "advisory"
    monthly_increase_limit_usd: Decimal | None = None
    monthly_total_limit_usd: Decimal | None = None

    @property
    def active(self) -> bool:
        limits = (self.monthly_increase_limit_usd, self.monthly_total_limit_usd)
        return self.level != "disabled" and any(limit is not None for limit in limits)

    def to_json(self) -> dict[str, Any]:
        def number(value: Decimal | None) -> float | None:
            return None if value is None else float(value)

        return {
            "policy": BUDGET_POLICY,
            "level": self.level,
            "monthly_increase_limit_usd": number(self.monthly_increase_limit_usd),
            "monthly_total_limit_usd": number(self.monthly_total_limit_usd),
        }

    @classmethod
    def from_json(cls, value: Any) -> BudgetConfig | None:
        if not isinstance(value, dict):
            return None
        return budget_config({BUDGET_POLICY: {"enforcementLevel": value.get("level"), **value}}, "document")


def _limit(entry: dict[str, Any], name: str, origin: str) -> Decimal | None:
    value = entry.get(name)
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise InvalidOperation
        limit = Decimal(str(value))
    except InvalidOperation:
        raise UserInputError(
            f"{origin}: {BUDGET_POLICY}.{name} must be a number of USD, not {value!r}"
        ) from None
    if limit < 0:
        raise UserInputError(f"{origin}: {BUDGET_POLICY}.{name} must not be negative")
    return limit


def budget_config(config: Any, origin: str) -> BudgetConfig:
    """The policy's settings from a policy-config document (`{"all": level}` sets its level too)."""
    if not isinstance(config, dict):
        return BudgetConfig()
    entry = config.get(BUDGET_POLICY)
    all_level = config.get("all")
    if entry is None:
        entry = {}
    if isinstance(entry, str):
        entry = {"enforcementLevel": entry}
    if not isinstance(entry, dict):
        raise UserInputError(f"{origin}: {BUDGET_POLICY} must be a level or an object")
    level = entry.get("enforcementLevel") or (all_level if isinstance(all_level, str) else None) or "advisory"
    if level not in LEVELS:
        raise UserInputError(f"{origin}: {BUDGET_POLICY}.enforcementLevel must be one of {', '.join(LEVELS)}")
    return BudgetConfig(
        level=str(level),
        monthly_increase_limit_usd=_limit(entry, "monthly_increase_limit_usd", origin),
        monthly_total_limit_usd=_limit(entry, "monthly_total_limit_usd", origin),
    )


def check_budget(cost: dict[str, Any], config: BudgetConfig) -> list[dict[str, str]]:
    """Violations (PolicyViolation's fields) of a preview's `cost` document against the limits."""
    if not config.active:
        return []
    problems = []
    diff = Decimal(str(cost.get("diff_monthly_usd") or 0))
    total = Decimal(str(cost.get("monthly_usd") or 0))
    increase_limit = config.monthly_increase_limit_usd
    if increase_limit is not None and diff > increase_limit:
        problems.append(
            f"this change adds {money(diff)} a month, over the limit of {money(increase_limit)} a month"
        )
    total_limit = config.monthly_total_limit_usd
    if total_limit is not None and total > total_limit:
        problems.append(
            f"the fleet would cost {money(total)} a month, over the limit of {money(total_limit)} a month"
        )
    if not problems:
        return []
    unknown = int(cost.get("unknown_count") or 0)
    note = f" ({unknown} item(s) are not priced and not counted)" if unknown else ""
    message = (
        f"{'; '.join(problems)}{note}. Remediation: shrink the change, or raise the limit in the policy "
        f"config ({BUDGET_POLICY}) once the spending is approved."
    )
    return [
        {"policy": BUDGET_POLICY, "pack": PACK, "level": config.level, "message": message, "resource": ""}
    ]
