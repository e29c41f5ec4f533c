"""Staged rollouts: which wave each selected cluster falls in, and when a wave halts the rollout.

Pure functions of the policy (the spec's `rollout:` block or `up --waves ...`) and the selected clusters in
spec order; the engine (engine/operations/rollout.py) runs the waves on the scheduler. Rules:

* waves are taken in order; a cluster falls in the first wave that takes it, so every selected cluster is
  in exactly one wave: `clusters` takes the clusters matching any selector (`project-key/cluster-name`,
  fnmatch globs), `count: N` the next N not yet taken, `percent: P` the next ceil(P% of all selected) (at
  least one), `rest` all the others. Clusters no wave took form a last, implicit `rest` wave;
* inside a wave the order is the spec's (projects, then their clusters): deterministic and shown;
* a wave's clusters of one capacity block group never apply more than `max_in_flight_per_reservation` at
  once (the scheduler's per-group limit); the reservation is shown by a label, never by its id;
* a wave halts the rollout (later waves are not started) when: `gate-failure` — a cluster of it failed
  (its stack, or its health gate); `policy-violation` — that, or any policy violation reported;
  `failures: K` — K clusters of the rollout failed so far; and, with `maintenance` named too, a cluster of
  it was held (an active maintenance event or a node in NebiusGPUError: engine/health/model.py
  `hold_reason`), which otherwise only keeps that cluster back while the others proceed;
* a wave with `soak: DURATION` (not the last) keeps the next wave waiting that long after its gates passed,
  while its clusters' health is read again and again; a cluster that is not clean halts the rollout.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from npa_pulumi.errors import UserInputError
from npa_pulumi.spec.durations import describe, duration_seconds

if TYPE_CHECKING:
    from npa_pulumi.plan.targets import Target
    from npa_pulumi.spec.models import RolloutSpec


class WaveKind(StrEnum):
    CLUSTERS = "clusters"
    COUNT = "count"
    PERCENT = "percent"
    REST = "rest"


class HaltOn(StrEnum):
    GATE_FAILURE = "gate-failure"
    POLICY_VIOLATION = "policy-violation"
    FAILURES = "failures"
    MAINTENANCE = "maintenance"  # beside one of the others: a held cluster halts the rollout too


class WaveState(StrEnum):
    """A wave's state as a rollout records it (engine/operations/rollout.py) and `status` shows it."""

    WAITING = "waiting"  # not started yet, or every cluster of it held (the next wave waits for it)
    APPLYING = "applying"
    SOAKING = "soaking"  # its gates passed; its health is watched for the wave's soak
    PASSED = "passed"
    HALTED = "halted"  # its clusters failed: the rollout stopped here
    NOT_STARTED = "not-started"  # an earlier wave halted the rollout


@dataclass(frozen=True)
class WaveRule:
    kind: WaveKind
    selectors: tuple[str, ...] = ()
    number: int = 0
    implicit: bool = False  # the `rest` wave added for clusters no written wave took
    soak_s: float = 0.0  # after its gates passed, its health must stay clean this long (0: no soak)

    def describe(self) -> str:
        if self.kind is WaveKind.CLUSTERS:
            return ", ".join(self.selectors)
        if self.kind is WaveKind.COUNT:
            return f"count {self.number}"
        if self.kind is WaveKind.PERCENT:
            return f"{self.number}%"
        return "rest (implicit)" if self.implicit else "rest"


@dataclass(frozen=True)
class RolloutPolicy:
    waves: tuple[WaveRule, ...]
    max_in_flight: int = 0  # 0: the run's --concurrency
    max_in_flight_per_reservation: int = 0  # 0: no limit of its own
    halt_on: HaltOn = HaltOn.GATE_FAILURE
    halt_failures: int = 1  # halt_on failures: K
    halt_on_maintenance: bool = False  # a held cluster halts the rollout at its wave
    approval_before: int = 0  # the wave that waits for approvals (0: none does)
    approval_min: int = 0

    @classmethod
    def from_spec(cls, spec: RolloutSpec) -> RolloutPolicy:
        halt = spec.halt_on
        failures, maintenance = 1, False
        if isinstance(halt, str | list):
            named = {HaltOn(h) for h in ([halt] if isinstance(halt, str) else halt)}
            maintenance = HaltOn.MAINTENANCE in named
            halt_on = HaltOn.POLICY_VIOLATION if HaltOn.POLICY_VIOLATION in named else HaltOn.GATE_FAILURE
        else:
            halt_on, failures, maintenance = HaltOn.FAILURES, halt.failures, halt.maintenance
        return cls(
            waves=tuple(_rule_of_spec(wave) for wave in spec.waves),
            max_in_flight=spec.max_in_flight,
            max_in_flight_per_reservation=spec.max_in_flight_per_reservation,
            halt_on=halt_on,
            halt_failures=failures,
            halt_on_maintenance=maintenance,
            approval_before=spec.approval.before if spec.approval else 0,
            approval_min=spec.approval.min if spec.approval else 0,
        )

    def halt_description(self) -> str:
        described = (
            f"failures: {self.halt_failures}" if self.halt_on is HaltOn.FAILURES else str(self.halt_on)
        )
        return f"{described}, maintenance" if self.halt_on_maintenance else described


def _rule_of_spec(wave: Any) -> WaveRule:
    soak = (duration_seconds(wave.soak) or 0.0) if wave.soak is not None else 0.0
    if wave.clusters is not None:
        return WaveRule(WaveKind.CLUSTERS, selectors=tuple(wave.clusters), soak_s=soak)
    if wave.count is not None:
        return WaveRule(WaveKind.COUNT, number=wave.count, soak_s=soak)
    if wave.percent is not None:
        return WaveRule(WaveKind.PERCENT, number=wave.percent, soak_s=soak)
    return WaveRule(WaveKind.REST, soak_s=soak)


def parse_waves(text: str) -> tuple[WaveRule, ...]:
    """`up --waves 'research/train;3;25%;rest'`: waves separated by `;`; each is `rest`, a count (N), a
    percentage (P%) or comma-separated cluster selectors. Raises UserInputError naming the bad wave."""
    rules: list[WaveRule] = []
    parts = [part.strip() for part in text.split(";")]
    for position, part in enumerate(parts, start=1):
        where = f"--waves: wave {position} ({part!r})"
        if not part:
            raise UserInputError(f"{where} is empty: write `rest`, a count, a percentage or selectors")
        if part == "rest":
            if position != len(parts):
                raise UserInputError(f"{where}: `rest` takes every remaining cluster; it must be last")
            rules.append(WaveRule(WaveKind.REST))
        elif part.isdigit():
            if int(part) < 1:
                raise UserInputError(f"{where}: a count is at least 1")
            rules.append(WaveRule(WaveKind.COUNT, number=int(part)))
        elif part.endswith("%") and part[:-1].isdigit():
            percent = int(part[:-1])
            if not 1 <= percent <= 100:
                raise UserInputError(f"{where}: a percentage is between 1% and 100%")
            rules.append(WaveRule(WaveKind.PERCENT, number=percent))
        else:
            selectors = tuple(s.strip() for s in part.split(",") if s.strip())
            bad = [s for s in selectors if "/" not in s]
            if bad:
                raise UserInputError(
                    f"{where}: selector {bad[0]!r} is not project-key/cluster-name (globs allowed, "
                    "e.g. research/* or */train)"
                )
            rules.append(WaveRule(WaveKind.CLUSTERS, selectors=selectors))
    return tuple(rules)


@dataclass(frozen=True)
class RolloutMember:
    stack: str
    key: str  # project-key/cluster-name
    reservation: str = ""  # a label of its capacity block group ("reservation-1"), never the id


@dataclass(frozen=True)
class Wave:
    index: int  # 1-based
    rule: WaveRule
    members: tuple[RolloutMember, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "wave": self.index,
            "rule": self.rule.describe(),
            "clusters": [m.key for m in self.members],
            "stacks": [m.stack for m in self.members],
            "reservations": {m.key: m.reservation for m in self.members if m.reservation},
            **({"soak_s": self.rule.soak_s} if self.rule.soak_s else {}),
        }


@dataclass(frozen=True)
class RolloutPlan:
    policy: RolloutPolicy
    waves: tuple[Wave, ...] = field(default_factory=tuple)

    def wave_of(self, stack: str) -> Wave | None:
        return next((w for w in self.waves if any(m.stack == stack for m in w.members)), None)

    def limits(self) -> dict[str, int]:
        """The scheduler's per-group limits: one group per capacity block group."""
        limit = self.policy.max_in_flight_per_reservation
        if limit <= 0:
            return {}
        return {m.reservation: limit for w in self.waves for m in w.members if m.reservation}

    def to_json(self) -> dict[str, Any]:
        return {
            "waves": [w.to_json() for w in self.waves],
            "max_in_flight": self.policy.max_in_flight,
            "max_in_flight_per_reservation": self.policy.max_in_flight_per_reservation,
            "halt_on": self.policy.halt_description(),
        }

    def lines(self) -> list[str]:
        """The waves for a terminal: one line per wave, its clusters in the order they start."""
        out = []
        for wave in self.waves:
            names = ", ".join(f"{m.key} [{m.reservation}]" if m.reservation else m.key for m in wave.members)
            soak = f", then soak {describe(wave.rule.soak_s)}" if wave.rule.soak_s else ""
            out.append(
                f"wave {wave.index} ({wave.rule.describe()}{soak}): {names or '(no selected cluster)'}"
            )
        return out


def reservation_labels(blocks: Sequence[str]) -> list[str]:
    """A label per cluster's capacity block group ("" for none), numbered by first appearance, so the
    plan can say which clusters share a reservation without printing its id."""
    numbers: dict[str, int] = {}
    labels = []
    for block in blocks:
        if not block:
            labels.append("")
            continue
        numbers.setdefault(block, len(numbers) + 1)
        labels.append(f"reservation-{numbers[block]}")
    return labels


def matches(selector: str, key: str) -> bool:
    return fnmatch.fnmatchcase(key, selector)


def assign_waves(policy: RolloutPolicy, members: Sequence[RolloutMember]) -> RolloutPlan:
    """Every member in exactly one wave, in spec order inside each (see the module's rules)."""
    total = len(members)
    left = list(members)
    waves: list[Wave] = []
    for index, rule in enumerate(policy.waves, start=1):
        if rule.kind is WaveKind.CLUSTERS:
            taken = [m for m in left if any(matches(s, m.key) for s in rule.selectors)]
        elif rule.kind is WaveKind.COUNT:
            taken = left[: max(0, rule.number)]
        elif rule.kind is WaveKind.PERCENT:
            taken = left[: max(1, math.ceil(total * rule.number / 100))] if total else []
        else:
            taken = list(left)
        chosen = {m.stack for m in taken}
        left = [m for m in left if m.stack not in chosen]
        waves.append(Wave(index, rule, tuple(taken)))
    if left:
        waves.append(Wave(len(waves) + 1, WaveRule(WaveKind.REST, implicit=True), tuple(left)))
    return RolloutPlan(policy, tuple(waves))


def members_of(targets: Sequence[Target]) -> list[RolloutMember]:
    """The selected targets as rollout members, in spec order, each with its reservation's label."""
    labels = reservation_labels([t.cluster.capacity_block_group_value() for t in targets])
    return [
        RolloutMember(t.cluster_stack, f"{t.project_key}/{t.cluster_name}", label)
        for t, label in zip(targets, labels, strict=True)
    ]


def with_overrides(
    base: RolloutPolicy | None,
    waves: str | None = None,
    max_in_flight: int | None = None,
    max_in_flight_per_reservation: int | None = None,
) -> RolloutPolicy | None:
    """The spec's policy (`base`) with the command line's values in place of its own; None when neither
    asks for a rollout."""
    if base is None and not (waves or max_in_flight or max_in_flight_per_reservation):
        return None
    base = base or RolloutPolicy(waves=())
    return RolloutPolicy(
        waves=parse_waves(waves) if waves else base.waves,
        max_in_flight=max_in_flight or base.max_in_flight,
        max_in_flight_per_reservation=max_in_flight_per_reservation or base.max_in_flight_per_reservation,
        halt_on=base.halt_on,
        halt_failures=base.halt_failures,
        halt_on_maintenance=base.halt_on_maintenance,
        approval_before=base.approval_before,
        approval_min=base.approval_min,
    )


def approval_reason(policy: RolloutPolicy, next_wave: int, approvers: Iterable[str], run: str) -> str | None:
    """Why wave `next_wave` may not start yet for want of approvals (None: it may). An approval by the
    run's own identity (`run`) does not count: a run cannot approve its own change."""
    if not policy.approval_min or next_wave != policy.approval_before:
        return None
    others = sorted({a for a in approvers if a and a != run})
    if len(others) >= policy.approval_min:
        return None
    by = f" (by {', '.join(others)})" if others else ""
    return (
        f"wave {next_wave} waits for {policy.approval_min} approval(s) by another identity than this run's "
        f"({run}): {len(others)} so far{by}; `npa-pulumi approve --spec SPEC --wave {next_wave}`"
    )


@dataclass(frozen=True)
class MemberOutcome:
    """What a wave's cluster came to, for the halting decision."""

    key: str
    failed: bool  # its stack failed, or its health gate (the lifecycle the stack recorded)
    status: str = ""
    violations: int = 0  # policy violations reported for it
    held: str = ""  # why it was not started (maintenance, a NebiusGPUError node); "" when it was not held


def unvouched_reason(wave: Wave, outcomes: Sequence[MemberOutcome]) -> str | None:
    """Why `wave` does not open the next one although nothing in it failed: every cluster of it this run
    reached was held (maintenance, a NebiusGPUError node), so none was applied and passed its gate, and
    nothing vouched for the change (a wave is evidence only through such clusters, or unchanged healthy
    ones). None when one of them was applied or unchanged, or the run reached none of them (a shard)."""
    reached = [o for o in outcomes if o.status != "not-run"]
    if not reached or any(not o.held for o in reached):
        return None
    held = "; ".join(f"{o.key}: {o.held}" for o in reached)
    return f"wave {wave.index}: every cluster held, so nothing vouched for the change ({held})"


def halt_reason(
    policy: RolloutPolicy, wave: Wave, outcomes: Sequence[MemberOutcome], failures_before: int
) -> str | None:
    """Why `wave` halts the rollout, or None when the next wave may start. `failures_before`: clusters of
    earlier waves that failed (only `failures: K` tolerates any)."""
    failed = [o for o in outcomes if o.failed]
    named = ", ".join(f"{o.key} ({o.status})" for o in failed)
    if policy.halt_on is HaltOn.FAILURES:
        count = failures_before + len(failed)
        if count >= policy.halt_failures:
            return f"{count} cluster(s) failed, halt_on failures: {policy.halt_failures}: {named}"
    elif failed:
        return f"wave {wave.index}: {named}"
    elif policy.halt_on is HaltOn.POLICY_VIOLATION:
        violating = [o.key for o in outcomes if o.violations]
        if violating:
            keys = ", ".join(violating)
            return f"wave {wave.index}: policy violation(s) on {keys} (halt_on policy-violation)"
    held = [o for o in outcomes if o.held]
    if policy.halt_on_maintenance and held:
        why = "; ".join(f"{o.key} held: {o.held}" for o in held)
        return f"wave {wave.index}: {why} (halt_on maintenance)"
    return None
