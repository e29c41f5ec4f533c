"""A staged rollout of `up` on the one scheduler: waves of cluster jobs, each behind the previous wave's gate.

The waves come from plan/rollout.py (the spec's `rollout:` block, or `up --waves ...`). Here they become
scheduler jobs: every cluster job of wave N waits (`after`) for wave N-1's *barrier*, a job of no work that
waits for every cluster of its wave and decides, from what their stacks recorded (a failed stack, or the
`lifecycle` output of a failed health gate: `deployed-validation-failed`, `deployed-mig-not-ready`), whether
the rollout halts. A halted barrier fails, so the scheduler blocks every later cluster job: those clusters
are never attempted and their stacks are not touched. Clusters of one capacity block group share a
scheduler group limited to `max_in_flight_per_reservation`; the scheduler's width is `max_in_flight`.

Before a wave's first cluster starts, the health of the wave's clusters is read once (as `health` reads it:
one list of maintenance events per project, one list of nodes per cluster): a cluster with an active
maintenance event or a node in NebiusGPUError (engine/health/model.py `hold_reason`) is `held` with the
reason, never started, while the others proceed; `--ignore-maintenance` takes it anyway (the reason is kept
as a warning); `halt_on: maintenance` makes a held cluster halt the rollout at its wave. A wave with
`soak: DURATION` (not the last) keeps its barrier open that long after its gates passed, reading its
deployed clusters' health again and again (`soak_problem`): one that is not clean halts the rollout, and
the next wave never starts.

The rollout's state is recorded as tags on the cluster stacks it ran (like engine/lifecycle.py's), never on
the stacks of waves it did not reach: `npa:rollout-run` (the run), `npa:rollout-wave` (`N/of`),
`npa:rollout-state` (applying, soaking, passed, halted) and, on a halted wave, `npa:rollout-reason` and
`npa:rollout-resume`. Tags live in the backend beside the stacks, so `status` on another machine shows which
waves finished and where the rollout halted, and prints the command that resumes it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.engine import lifecycle
from npa_pulumi.engine.automation import StackOp
from npa_pulumi.engine.graph import Walk, WaveArrangement, barrier_key
from npa_pulumi.engine.graph import is_barrier as is_barrier_key
from npa_pulumi.engine.health.model import hold_reason, soak_problem
from npa_pulumi.engine.requests import rollout as rollout_request
from npa_pulumi.engine.retries import Retry, rollout_resume
from npa_pulumi.errors import NpaError
from npa_pulumi.output.health import ClusterHealth
from npa_pulumi.output.results import FAILED_LIFECYCLES, StackResult, StackStatus
from npa_pulumi.output.stack_outputs import ClusterOutputs
from npa_pulumi.plan.rollout import (
    MemberOutcome,
    RolloutMember,
    RolloutPlan,
    RolloutPolicy,
    Wave,
    WaveState,
    approval_reason,
    assign_waves,
    halt_reason,
    members_of,
    unvouched_reason,
    with_overrides,
)
from npa_pulumi.runtime import tracing
from npa_pulumi.spec.durations import describe

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext

TAG_RUN = "npa:rollout-run"
TAG_WAVE = "npa:rollout-wave"
TAG_STATE = "npa:rollout-state"
TAG_REASON = "npa:rollout-reason"
TAG_RESUME = "npa:rollout-resume"
_MAX_TAG_VALUE = 250
HELD = StackStatus.HELD  # a cluster's status when a rollout did not start it (maintenance, NebiusGPUError)

# (cluster stacks, re-read their outputs) -> each one's health (engine/operations/health.py `clusters`)
HealthReader = Callable[[Sequence[str], bool], Mapping[str, ClusterHealth]]
# a wave -> (the identities that approved it for this spec, this run's identity)
ApprovalReader = Callable[[int], tuple[list[str], str]]
APPROVE_COMMAND = "approve"  # the audit record of `npa-pulumi approve` (sdk/approvals.py)


def read_approvals(context: FleetContext, wave: int) -> tuple[list[str], str]:
    """Who approved wave `wave` of this very spec (its digest), from the audit trail in the backend, and
    who this run is. A trail that cannot be read has no approvals."""
    from npa_pulumi.engine import audit as trail
    from npa_pulumi.engine.automation import AuditUnavailable

    try:
        principal = context.cloud.principal()
    except (CloudError, NpaError):
        principal = None
    run = trail.who(principal, context.where.profile).identity
    digest = trail.spec_digest(context.spec_path, context.spec.model_dump(mode="json"))
    try:
        records = trail.read(context.settings.backend_url, context.spec.name)
    except AuditUnavailable:
        return [], run
    approvers = [
        r.who.identity
        for r in records
        if r.command == APPROVE_COMMAND and r.spec_digest == digest and r.selection.get("wave") == wave
    ]
    return approvers, run


def soak_poll_s(soak_s: float) -> float:
    """How often a soak reads health: a sixth of the soak apart, at least a second and at most 30 s."""
    return min(30.0, max(1.0, soak_s / 6))


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
    return result.failed or ClusterOutputs.read(result.outputs).lifecycle in FAILED_LIFECYCLES


class RolloutRun:
    """One `up`'s rollout: arranges the cluster jobs into waves, holds the clusters under maintenance,
    soaks the waves that ask for it and records each wave's outcome.

    `health` reads clusters' health (engine/operations/health.py `clusters`); `sleep` and `clock` time
    the soak (tests give their own)."""

    def __init__(
        self,
        context: FleetContext,
        rollout: RolloutPlan,
        *,
        health: HealthReader,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        approvals: ApprovalReader | None = None,
    ) -> None:
        self.context = context
        self._approvals = approvals or (lambda wave: read_approvals(context, wave))
        self.plan = rollout
        self.run_id = lifecycle.this_run()
        self.resume = resume(context)
        self.resume_text = context.retry_text(self.resume)  # what the tags and the summary say
        self.ignore_maintenance = rollout_request(context.request).ignore_maintenance
        self.results: dict[str, StackResult] = {}
        self.states: dict[int, WaveState] = {w.index: WaveState.WAITING for w in rollout.waves}
        self.halted: tuple[int, str] | None = None
        # A wave all of whose clusters were held: it vouched for nothing, so the next one waits (not a halt:
        # nothing failed; the same `up` goes on once the holds are over, or with --ignore-maintenance).
        self.waiting: tuple[int, str] | None = None
        self.failures = 0
        self.soaks: dict[int, dict[str, Any]] = {}  # wave index -> what its soak saw
        self._health = health
        self._sleep = sleep
        self._clock = clock
        self._holds: dict[int, dict[str, str]] = {}  # wave index -> stack -> why it is held
        self._ops: dict[str, StackOp] = {}
        self._lock = threading.Lock()
        self._hold_lock = threading.Lock()

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
            held = self._held(wave, key)
            if held and not self.ignore_maintenance:
                return self._hold(wave, key, held)
            result: StackResult | None = None
            try:
                if held:  # --ignore-maintenance; the summary lists it under `taken_under_maintenance`
                    self.context.progress.message(f"{key}: taken under maintenance: {held}")
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

    # ------------------------------------------------------------------------------ holding

    def _held(self, wave: Wave, key: str) -> str | None:
        """Why `key` is not started (None: it is), from one health read of the wave's scheduled clusters,
        made when the wave's first cluster is about to start."""
        with self._hold_lock:
            if wave.index not in self._holds:
                stacks = [m.stack for m in wave.members if m.stack in self._ops]
                self._holds[wave.index] = self._read_holds(wave, stacks)
            return self._holds[wave.index].get(key)

    def _read_holds(self, wave: Wave, stacks: Sequence[str]) -> dict[str, str]:
        try:
            found = self._health(stacks, False)
        except (NpaError, CloudError) as err:
            # Not read: no cluster is held for it (each one's own run and gate judge it).
            self.context.progress.message(f"rollout wave {wave.index}: health not read ({err}); none held")
            return {}
        holds = {stack: hold_reason(found[stack]) for stack in stacks if stack in found}
        return {stack: why for stack, why in holds.items() if why}

    def _hold(self, wave: Wave, key: str, why: str) -> StackResult:
        op = self._ops[key]
        # Its tags say it was held, and why (`status` shows it): its resources are not touched.
        tags = {
            TAG_RUN: self.run_id,
            TAG_WAVE: f"{wave.index}/{len(self.plan.waves)}",
            TAG_STATE: HELD,
            TAG_REASON: " ".join(why.split())[:_MAX_TAG_VALUE],
        }
        self.context.executor.write_lifecycle(op, tags, remove=(TAG_RESUME,))
        result = op.result(
            HELD,
            error=f"held: {why}; not started. Run `up` again once it is over, or with --ignore-maintenance",
        )
        self.context.progress.phase(key, HELD, why)
        self.record(result)
        return result

    def _blocked(self, key: str, inner: Callable[[str], StackResult] | None) -> Callable[[str], StackResult]:
        wave = self.plan.wave_of(key)
        assert wave is not None, f"{key}: blocked outside the rollout's waves"

        def blocked(culprit: str) -> StackResult:
            op = self._ops[key]
            if is_barrier_key(culprit) and self.waiting is not None and self.halted is None:
                result = op.result(
                    "skipped",
                    error=f"wave {wave.index} not started: the rollout waits at wave {self.waiting[0]}: "
                    f"{self.waiting[1]}",
                )
            elif is_barrier_key(culprit):
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
                if self.waiting is not None:
                    self.states[wave.index] = WaveState.WAITING
                    return self._barrier_result(key, "failed", f"waiting at wave {self.waiting[0]}")
                outcomes = [self._outcome(m) for m in wave.members]
                reason = halt_reason(self.plan.policy, wave, outcomes, self.failures)
                self.failures += sum(1 for o in outcomes if o.failed)
                unvouched = unvouched_reason(wave, outcomes) if reason is None else None
                if unvouched is not None and wave.index < len(self.plan.waves):
                    self.waiting = (wave.index, unvouched)
                    self.states[wave.index] = WaveState.WAITING
                    tracing.wave_finished(wave.index, str(WaveState.WAITING), {"npa.reason": unvouched})
                    return self._barrier_result(key, "failed", unvouched)
            if reason is None:
                reason = self._soak(wave)  # outside the lock: it sleeps
            awaiting = self._awaiting_approval(wave) if reason is None else None
            with self._lock:
                if reason is not None:
                    self.halted = (wave.index, reason)
                    self.states[wave.index] = WaveState.HALTED
                else:
                    self.states[wave.index] = WaveState.PASSED
                if awaiting is not None:
                    # The wave passed; the next one waits for people (not a halt: nothing failed). The same
                    # `up` goes on once they approved: finished waves are unchanged and pass through.
                    self.waiting = (wave.index + 1, awaiting)
            ran = [m.stack for m in wave.members if m.stack in self._ops or m.stack in self.results]
            self._tag(wave, ran, reason or "")
            tracing.wave_finished(
                wave.index, str(self.states[wave.index]), {"npa.stacks": len(ran), "npa.reason": reason}
            )
            if reason is not None:
                return self._barrier_result(key, "failed", reason)
            if awaiting is not None:
                self.context.progress.message(f"rollout {awaiting}")
                return self._barrier_result(key, "failed", awaiting)
            return self._barrier_result(key, "passed")

        return barrier

    def _awaiting_approval(self, wave: Wave) -> str | None:
        """Why the wave after `wave` may not start for want of approvals (None: it may, or needs none)."""
        policy = self.plan.policy
        following = wave.index + 1
        if not policy.approval_min or following != policy.approval_before or following > len(self.plan.waves):
            return None
        approvers, run = self._approvals(following)
        return approval_reason(policy, following, approvers, run)

    def _outcome(self, member: RolloutMember) -> MemberOutcome:
        result = self.results.get(member.stack)
        if result is None:  # not selected for this run (another shard, a stage): nothing of it ran
            return MemberOutcome(member.key, failed=False, status="not-run")
        if result.status == HELD:
            return MemberOutcome(member.key, failed=False, status=HELD, held=self._holds_of(member.stack))
        if result.status == StackStatus.PENDING:
            # Its disruptive changes wait for a window (plan/deferral.py): not applied, so like a held
            # cluster it vouches for nothing, and fails nothing.
            why = str((result.pending or {}).get("reason", "pending a maintenance window"))
            return MemberOutcome(member.key, failed=False, status=StackStatus.PENDING, held=why)
        failed = gate_failed(result) or result.status is StackStatus.SKIPPED
        status = (ClusterOutputs.read(result.outputs).lifecycle or result.status) if failed else result.status
        return MemberOutcome(member.key, failed=failed, status=status, violations=len(result.policy))

    def _holds_of(self, stack: str) -> str:
        return next((found[stack] for found in self._holds.values() if stack in found), "")

    # --------------------------------------------------------------------------------- soaking

    def _soak(self, wave: Wave) -> str | None:
        """The wave's soak: its clusters deployed by this run must stay clean for `soak_s` (read at once,
        then every `soak_poll_s`, last at its end); the halt reason, or None. No soak for the last wave
        (nothing waits for it) or a wave this run deployed nothing in."""
        if not wave.rule.soak_s or wave.index == len(self.plan.waves):
            return None
        members = {m.stack: m.key for m in wave.members}
        deployed = [r for s, r in self.results.items() if s in members and r.status == "deployed"]
        if not deployed:
            self.soaks[wave.index] = {"seconds": wave.rule.soak_s, "skipped": "no cluster deployed"}
            return None
        stacks = [r.stack for r in deployed]
        with self._lock:
            self.states[wave.index] = WaveState.SOAKING
        self._tag(wave, stacks, "", WaveState.SOAKING)
        soak = wave.rule.soak_s
        self.context.progress.message(f"rollout wave {wave.index}: soaking {describe(soak)}")
        started, reads = self._clock(), 0
        while True:
            problems = self._soak_read(stacks, refresh=reads == 0)
            reads += 1
            elapsed = self._clock() - started
            record: dict[str, Any] = {"seconds": soak, "reads": reads, "elapsed_s": round(elapsed, 1)}
            if problems:
                named = {members[s]: why for s, why in problems.items()}
                self.soaks[wave.index] = {**record, "clean": False, "problems": named}
                listed = "; ".join(f"{key}: {why}" for key, why in named.items())
                return (
                    f"wave {wave.index}: not clean {round(elapsed)}s into its {describe(soak)} soak: {listed}"
                )
            left = soak - elapsed
            if left <= 0:
                self.soaks[wave.index] = {**record, "clean": True}
                return None
            self._sleep(min(soak_poll_s(soak), left))

    def _soak_read(self, stacks: Sequence[str], refresh: bool) -> dict[str, str]:
        """Each soaking cluster that is not clean, and why (a read that fails is not clean)."""
        try:
            found = self._health(stacks, refresh)
        except (NpaError, CloudError) as err:
            return {stack: f"health not read: {err}" for stack in stacks}
        problems = {
            stack: (
                soak_problem(found[stack], self.ignore_maintenance) if stack in found else "health not read"
            )
            for stack in stacks
        }
        return {stack: why for stack, why in problems.items() if why}

    def _tag(self, wave: Wave, stacks: Sequence[str], reason: str, state: WaveState | None = None) -> None:
        """Record the wave's state on the stacks it ran (never on a stack a run did not touch)."""
        state = state or self.states[wave.index]
        for stack in stacks:
            result = self.results.get(stack)
            if result is not None and result.status in ("skipped", HELD, StackStatus.PENDING):
                continue  # not started: a held stack's tags say so already (`_hold`)
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
        keys = {m.stack: m.key for w in self.plan.waves for m in w.members}
        for wave in document["waves"]:
            wave["state"] = str(self.states[wave["wave"]])
            holds = self._holds.get(wave["wave"]) or {}
            held = {s for s in holds if (r := self.results.get(s)) is not None and r.status == HELD}
            if held:
                wave["held"] = {keys[s]: holds[s] for s in held}
            if self.ignore_maintenance and set(holds) - held:
                wave["taken_under_maintenance"] = {keys[s]: why for s, why in holds.items() if s not in held}
            if wave["wave"] in self.soaks:
                wave["soak"] = self.soaks[wave["wave"]]
        if self.halted is not None:
            document["halted"] = {"wave": self.halted[0], "reason": self.halted[1]}
            document["resume_command"] = self.resume_text
        elif self.waiting is not None:
            document["waiting"] = {"wave": self.waiting[0], "reason": self.waiting[1]}
            document["resume_command"] = self.resume_text
        return document


def mark_holds(
    document: dict[str, Any],
    rollout: RolloutPlan,
    health: HealthReader,
    results: Sequence[StackResult],
    ignore_maintenance: bool,
) -> None:
    """The preview's rollout table: per wave, the clusters an `up` now would hold and why (`held`), or with
    --ignore-maintenance take under maintenance (`taken_under_maintenance`). Clusters the preview found
    unchanged are left out: an `up` passes them at once."""
    unchanged = {r.stack for r in results if r.status in ("no-changes", "unchanged")}
    stacks = [m.stack for w in rollout.waves for m in w.members if m.stack not in unchanged]
    try:
        found = health(stacks, False)
    except (NpaError, CloudError) as err:
        document["health_error"] = f"health not read, so no cluster is shown held: {err}"
        return
    for wave, entry in zip(rollout.waves, document["waves"], strict=True):
        holds = {m.key: hold_reason(found[m.stack]) for m in wave.members if m.stack in found}
        named = {key: why for key, why in holds.items() if why}
        if named:
            entry["taken_under_maintenance" if ignore_maintenance else "held"] = named


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
    halted_before = waiting_before = False
    for wave, entry in zip(rollout.waves, document["waves"], strict=True):
        mine = [tags[m.stack] for m in wave.members if tags[m.stack].get(TAG_RUN) == latest]
        held = {
            m.key: tags[m.stack].get(TAG_REASON, "")
            for m in wave.members
            if tags[m.stack].get(TAG_RUN) == latest and tags[m.stack].get(TAG_STATE) == HELD
        }
        if held:
            entry["held"] = held
        states = [t.get(TAG_STATE, "") for t in mine if t.get(TAG_STATE) != HELD]
        # A held cluster does not keep its wave from passing, unless every cluster of the wave was held:
        # then the wave vouched for nothing and the next one waits for it (RolloutRun.waiting).
        all_held = bool(held) and not states and wave.index < len(rollout.waves)
        states += [WaveState.PASSED] * len(held)
        if halted_before:
            state = WaveState.NOT_STARTED
        elif waiting_before:
            state = WaveState.WAITING
        elif all_held:
            state = WaveState.WAITING
            waiting_before = True
            document["waiting"] = {"wave": wave.index, "held": held}
        elif WaveState.HALTED in states:
            state = WaveState.HALTED
            halted_before = True
            first = next(t for t in mine if t.get(TAG_STATE) == WaveState.HALTED)
            document["halted"] = {"wave": wave.index, "reason": first.get(TAG_REASON, "")}
            document["resume_command"] = first.get(TAG_RESUME, "")
        elif states and len(states) == len(wave.members) and all(s == WaveState.PASSED for s in states):
            state = WaveState.PASSED
        elif WaveState.SOAKING in states:
            state = WaveState.SOAKING
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
    if not latest or document.get("halted") or document.get("waiting"):
        return
    recorded = lifecycle.Recorded(lifecycle.RUNNING_STATES[0], run=latest)
    if not recorded.current:
        return
    for wave in document["waves"]:
        if wave["state"] == WaveState.SOAKING:
            document["in_progress"] = wave["wave"]
            return
        if wave["state"] in (WaveState.WAITING, WaveState.APPLYING):
            wave["state"] = str(WaveState.APPLYING)
            document["in_progress"] = wave["wave"]
            return


def _run_started(run: str) -> float:
    parsed = lifecycle.RunId.parse(run)
    return parsed.started_at if parsed is not None else 0.0
