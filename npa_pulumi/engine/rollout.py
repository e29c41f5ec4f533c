"""A staged rollout of `up` on the one scheduler: waves of cluster jobs, each behind the previous wave's gate.

The waves come from plan/rollout.py (the spec's `rollout:` block, or `up --waves ...`). Here they become
scheduler jobs: every cluster job of wave N waits (`after`) for wave N-1's *barrier*, a job of no work that
waits for every cluster of its wave and decides, from what their stacks recorded (a failed stack, or the
`lifecycle` output of a failed health gate: `deployed-validation-failed`, `deployed-mig-not-ready`), whether
the rollout halts. A halted barrier fails, so the scheduler blocks every later cluster job: those clusters
are never attempted and their stacks are not touched. Clusters of one capacity block group share a
scheduler group limited to `max_in_flight_per_reservation`; the scheduler's width is `max_in_flight`.

The rollout's state is recorded as tags on the cluster stacks it ran (like engine/lifecycle.py's), never on
the stacks of waves it did not reach: `npa:rollout-run` (the run), `npa:rollout-wave` (`N/of`),
`npa:rollout-state` (applying, passed, halted) and, on a halted wave, `npa:rollout-reason` and
`npa:rollout-resume`. Tags live in the backend beside the stacks, so `status` on another machine shows which
waves finished and where the rollout halted, and prints the command that resumes it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine import lifecycle
from npa_pulumi.engine.automation import StackOp
from npa_pulumi.engine.graph import Walk, WaveArrangement, barrier_key
from npa_pulumi.engine.graph import is_barrier as is_barrier_key
from npa_pulumi.engine.requests import rollout as rollout_request
from npa_pulumi.engine.retries import Retry, rollout_resume
from npa_pulumi.output.results import FAILED_LIFECYCLES, StackResult
from npa_pulumi.plan.rollout import (
    MemberOutcome,
    RolloutMember,
    RolloutPlan,
    RolloutPolicy,
    Wave,
    WaveState,
    assign_waves,
    halt_reason,
    members_of,
    with_overrides,
)
from npa_pulumi.runtime import tracing

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext

TAG_RUN = "npa:rollout-run"
TAG_WAVE = "npa:rollout-wave"
TAG_STATE = "npa:rollout-state"
TAG_REASON = "npa:rollout-reason"
TAG_RESUME = "npa:rollout-resume"
_MAX_TAG_VALUE = 250


def policy(context: FleetContext) -> RolloutPolicy | None:
    """The run's rollout policy: the spec's `rollout:` block, with `--waves` / `--max-in-flight` /
    `--max-in-flight-per-reservation` in place of its values; None when neither asks for one."""
    options = rollout_request(context.request)
    spec = context.spec.rollout
    return with_overrides(
        RolloutPolicy.from_spec(spec) if spec is not None else None,
        options.waves,
        options.max_in_flight,
        options.max_in_flight_per_reservation,
    )


def plan(context: FleetContext) -> RolloutPlan | None:
    """The waves over the selected clusters, in spec order (None: no rollout asked)."""
    chosen = policy(context)
    return assign_waves(chosen, members_of(context.targets)) if chosen is not None else None


def resume(context: FleetContext) -> Retry:
    """The `up` that resumes a halted rollout, with the run's `--waves` / `--max-in-flight` /
    `--max-in-flight-per-reservation` (engine/retries.py `rollout_resume`)."""
    return rollout_resume(context.where, context.spec_path, rollout_request(context.request))


def gate_failed(result: StackResult) -> bool:
    """The stack failed, or its update passed but the health gate it ran did not (the recorded lifecycle)."""
    return result.failed or result.outputs.get("lifecycle") in FAILED_LIFECYCLES


class RolloutRun:
    """One `up`'s rollout: arranges the cluster jobs into waves and records each wave's outcome."""

    def __init__(self, context: FleetContext, rollout: RolloutPlan) -> None:
        self.context = context
        self.plan = rollout
        self.run_id = lifecycle.this_run()
        self.resume = resume(context)
        self.resume_text = context.retry_text(self.resume)  # what the tags and the summary say
        self.results: dict[str, StackResult] = {}
        self.states: dict[int, WaveState] = {w.index: WaveState.WAITING for w in rollout.waves}
        self.halted: tuple[int, str] | None = None
        self.failures = 0
        self._ops: dict[str, StackOp] = {}
        self._lock = threading.Lock()

    # --------------------------------------------------------------------------- arranging

    def record(self, result: StackResult) -> None:
        """A cluster's result known before the scheduler runs (an unchanged cluster passes at once)."""
        with self._lock:
            self.results[result.stack] = result

    def arrangement(self) -> WaveArrangement[StackResult]:
        """The waves as the graph adds them to the forward walk (engine/graph.py `Walk.with_waves`)."""
        members: dict[int, list[str]] = {}
        group_of: dict[str, Hashable] = {}
        for wave in self.plan.waves:
            members[wave.index] = [m.stack for m in wave.members]
            for member in wave.members:
                tracing.assign_wave(
                    member.stack, wave.index, len(self.plan.waves)
                )  # its span under the wave's
                if member.reservation:
                    group_of[member.stack] = member.reservation
        return WaveArrangement(
            members=members,
            tracked=self._tracked,
            barrier=self._barrier,
            blocked=self._blocked,
            group_of=group_of,
            limits={group: limit for group, limit in self.plan.limits().items()},
            width=self.plan.policy.max_in_flight or None,
        )

    def run_walk(self, ops: Sequence[StackOp], walk: Walk[StackResult]) -> list[StackResult]:
        """`context.run_walk` for a rollout: the walk with its waves, and a failed health gate counted as a
        failure (what blocks the later waves)."""
        for op in ops:
            self.context.progress.add(op.stack)
        self._ops = {op.stack: op for op in ops}
        base = self.context.scheduler(ops)

        def skipped(key: str) -> StackResult:
            return self._barrier_result(key, "skipped") if is_barrier_key(key) else base.skipped(key)

        def failed(key: str, error: str) -> StackResult:
            if is_barrier_key(key):
                return self._barrier_result(key, "failed", error)
            return base.failed(key, error)

        scheduler = dataclasses.replace(base, is_failure=gate_failed, skipped=skipped, failed=failed)
        return walk.with_waves(self.arrangement()).run(scheduler)

    @staticmethod
    def _barrier_result(key: str, status: str, error: str | None = None) -> StackResult:
        return StackResult(stack=key, kind="project", project_key="", status=status, error=error)

    def _tracked(self, key: str, work: Callable[[], StackResult]) -> Callable[[], StackResult]:
        wave = self.plan.wave_of(key)
        assert wave is not None, f"{key}: tracked outside the rollout's waves"

        def job() -> StackResult:
            with self._lock:
                if self.states[wave.index] is WaveState.WAITING:
                    self.states[wave.index] = WaveState.APPLYING
            result: StackResult | None = None
            try:
                self._tag(wave, [key], "", WaveState.APPLYING)  # best effort: a new stack has no tags yet
                result = work()
                if not result.failed and not result.outputs and result.status != "unchanged":
                    # The halting decision reads what the stack recorded: its `lifecycle` output.
                    op = self._ops.get(result.stack)
                    outputs = self.context.stack_outputs([op], refresh=True)[op.stack] if op else None
                    result.outputs = dict(outputs or {})
                return result
            finally:
                if result is not None:
                    self.record(result)

        return job

    def _blocked(self, key: str, inner: Callable[[str], StackResult] | None) -> Callable[[str], StackResult]:
        wave = self.plan.wave_of(key)
        assert wave is not None, f"{key}: blocked outside the rollout's waves"

        def blocked(culprit: str) -> StackResult:
            op = self._ops[key]
            if is_barrier_key(culprit):
                halted = self.halted
                where = f"wave {halted[0]}" if halted else f"wave {wave.index - 1}"
                result = op.result(
                    "skipped", error=f"wave {wave.index} not started: the rollout halted at {where}"
                )
            elif inner is not None:
                result = inner(culprit)
            else:
                result = op.result("skipped", error=f"{culprit} failed; not attempted")
            self.context.progress.phase(key, "skipped", result.error or "")
            self.record(result)
            return result

        return blocked

    # ---------------------------------------------------------------------------- barriers

    def _barrier(self, index: int) -> Callable[[], StackResult]:
        wave = next(w for w in self.plan.waves if w.index == index)

        def barrier() -> StackResult:
            key = barrier_key(wave.index)
            with self._lock:
                if self.halted is not None:
                    self.states[wave.index] = WaveState.NOT_STARTED
                    return self._barrier_result(key, "failed", f"halted at wave {self.halted[0]}")
                outcomes = [self._outcome(m) for m in wave.members]
                reason = halt_reason(self.plan.policy, wave, outcomes, self.failures)
                self.failures += sum(1 for o in outcomes if o.failed)
                if reason is not None:
                    self.halted = (wave.index, reason)
                    self.states[wave.index] = WaveState.HALTED
                else:
                    self.states[wave.index] = WaveState.PASSED
            ran = [m.stack for m in wave.members if m.stack in self._ops or m.stack in self.results]
            self._tag(wave, ran, reason or "")
            tracing.wave_finished(
                wave.index, str(self.states[wave.index]), {"npa.stacks": len(ran), "npa.reason": reason}
            )
            if reason is not None:
                return self._barrier_result(key, "failed", reason)
            return self._barrier_result(key, "passed")

        return barrier

    def _outcome(self, member: RolloutMember) -> MemberOutcome:
        result = self.results.get(member.stack)
        if result is None:  # not selected for this run (another shard, a stage): nothing of it ran
            return MemberOutcome(member.key, failed=False, status="not-run")
        failed = gate_failed(result) or result.status == "skipped"
        status = str(result.outputs.get("lifecycle") or result.status) if failed else result.status
        return MemberOutcome(member.key, failed=failed, status=status, violations=len(result.policy))

    def _tag(self, wave: Wave, stacks: Sequence[str], reason: str, state: WaveState | None = None) -> None:
        """Record the wave's state on the stacks it ran (never on a stack a run did not touch)."""
        state = state or self.states[wave.index]
        for stack in stacks:
            result = self.results.get(stack)
            if result is not None and result.status == "skipped":
                continue
            op = self._ops.get(stack) or StackOp(stack, "cluster", "", None, None, {})
            tags = {
                TAG_RUN: self.run_id,
                TAG_WAVE: f"{wave.index}/{len(self.plan.waves)}",
                TAG_STATE: str(state),
            }
            remove: tuple[str, ...] = (TAG_REASON, TAG_RESUME)
            if state is WaveState.HALTED:
                tags[TAG_REASON] = " ".join(reason.split())[:_MAX_TAG_VALUE]
                tags[TAG_RESUME] = self.resume_text[:_MAX_TAG_VALUE]
                remove = ()
            self.context.executor.write_lifecycle(op, tags, remove=remove)

    # ----------------------------------------------------------------------------- summary

    def summary(self) -> dict[str, Any]:
        document = self.plan.to_json()
        for wave in document["waves"]:
            wave["state"] = str(self.states[wave["wave"]])
        if self.halted is not None:
            document["halted"] = {"wave": self.halted[0], "reason": self.halted[1]}
            document["resume_command"] = self.resume_text
        return document


def is_barrier(result: StackResult) -> bool:
    return is_barrier_key(result.stack)


# ------------------------------------------------------------------------------------ status


def status(context: FleetContext) -> dict[str, Any] | None:
    """The rollout as recorded beside the stacks: each wave's state in the latest rollout run, where it
    halted and the command that resumes it (None: no rollout in the spec)."""
    rollout = plan(context)
    if rollout is None:
        return None
    tags = {
        m.stack: context.executor.read_tags(StackOp(m.stack, "cluster", "", None, None, {})) or {}
        for w in rollout.waves
        for m in w.members
    }
    runs = {t[TAG_RUN] for t in tags.values() if t.get(TAG_RUN)}
    latest = max(runs, key=_run_started, default="")
    document = rollout.to_json()
    halted_before = False
    for wave, entry in zip(rollout.waves, document["waves"], strict=True):
        mine = [tags[m.stack] for m in wave.members if tags[m.stack].get(TAG_RUN) == latest]
        states = [t.get(TAG_STATE, "") for t in mine]
        if halted_before:
            state = WaveState.NOT_STARTED
        elif WaveState.HALTED in states:
            state = WaveState.HALTED
            halted_before = True
            first = next(t for t in mine if t.get(TAG_STATE) == WaveState.HALTED)
            document["halted"] = {"wave": wave.index, "reason": first.get(TAG_REASON, "")}
            document["resume_command"] = first.get(TAG_RESUME, "")
        elif states and len(states) == len(wave.members) and all(s == WaveState.PASSED for s in states):
            state = WaveState.PASSED
        elif states:
            state = WaveState.APPLYING
        else:
            state = WaveState.WAITING
        entry["state"] = str(state)
    if latest:
        document["run"] = latest
    # A wave waiting behind a passed one while the run still lives: the rollout is in that wave.
    _in_progress(document, latest)
    return document


def _in_progress(document: dict[str, Any], latest: str) -> None:
    if not latest or document.get("halted"):
        return
    recorded = lifecycle.Recorded(lifecycle.RUNNING_STATES[0], run=latest)
    if not recorded.current:
        return
    for wave in document["waves"]:
        if wave["state"] in (WaveState.WAITING, WaveState.APPLYING):
            wave["state"] = str(WaveState.APPLYING)
            document["in_progress"] = wave["wave"]
            return


def _run_started(run: str) -> float:
    parsed = lifecycle.RunId.parse(run)
    return parsed.started_at if parsed is not None else 0.0
