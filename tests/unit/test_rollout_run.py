"""The rollout on the scheduler (engine/rollout.py), with plain functions as the stacks' work: a wave starts
only after the previous one passed, a failed health gate (the `lifecycle` its stack recorded) halts it and
later waves never run, unchanged clusters pass at once, the per-reservation limit holds, and the waves'
states are recorded as tags on the stacks that ran only."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from npa_pulumi.cli.retry_commands import render_retry
from npa_pulumi.engine.automation import StackOp
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.graph import WalkKind, independent
from npa_pulumi.engine.progress import Progress
from npa_pulumi.engine.requests import FleetRequest, Rollout, UpRequest, Where
from npa_pulumi.engine.retries import Operation, RenderRetry, Retry
from npa_pulumi.engine.rollout import TAG_RESUME, TAG_STATE, RolloutRun
from npa_pulumi.output.results import StackResult
from npa_pulumi.plan.rollout import HaltOn, RolloutMember, RolloutPolicy, assign_waves, parse_waves


class FakeExecutor:
    def __init__(self) -> None:
        self.tags: dict[str, dict[str, str]] = {}

    def write_lifecycle(self, op: StackOp, tags: dict[str, str], remove: tuple[str, ...] = ()) -> None:
        current = self.tags.setdefault(op.stack, {})
        current.update(tags)
        for name in remove:
            current.pop(name, None)


class FakeContext:
    """What RolloutRun uses of a FleetContext."""

    def __init__(self, concurrency: int = 4, rollout: Rollout = Rollout()) -> None:
        self.request = UpRequest(concurrency=concurrency, rollout=rollout)
        self.where = Where(cloud="local")
        self.spec_path = "fleet.yaml"
        self.render_retry: RenderRetry | None = render_retry
        self.progress = Progress(enabled=False)
        self.executor = FakeExecutor()

    def scheduler(self, ops: list[StackOp], limits: dict[Any, int] | None = None) -> Any:
        return FleetContext.scheduler(self, ops, limits)  # type: ignore[arg-type]

    def retry_text(self, retry: Retry) -> str:
        return FleetContext.retry_text(self, retry)  # type: ignore[arg-type]

    def stack_outputs(self, ops: list[StackOp], refresh: bool = False) -> dict[str, Any]:
        return {op.stack: {"lifecycle": "deployed"} for op in ops}


def op(stack: str) -> StackOp:
    return StackOp(stack, "cluster", "p", stack, None, {})


def members(*names: str, reservation: str = "") -> list[RolloutMember]:
    return [RolloutMember(n, f"p/{n}", reservation) for n in names]


def deployed(stack: str, lifecycle: str = "deployed") -> StackResult:
    return op(stack).result("deployed", outputs={"lifecycle": lifecycle})


def run(
    policy: RolloutPolicy,
    names: list[str],
    work: Callable[[str], StackResult],
    reservation: str = "",
    unchanged: tuple[str, ...] = (),
    context: FakeContext | None = None,
) -> tuple[RolloutRun, list[StackResult], list[str], FakeContext]:
    context = context or FakeContext()
    plan = assign_waves(policy, members(*names, reservation=reservation))
    rollout = RolloutRun(context, plan)  # type: ignore[arg-type]
    for name in unchanged:
        rollout.record(op(name).result("unchanged"))
    ran: list[str] = []
    lock = threading.Lock()

    def job(name: str) -> Callable[[], StackResult]:
        def body() -> StackResult:
            with lock:
                ran.append(name)
            return work(name)

        return body

    ops = [op(n) for n in names if n not in unchanged]
    walk = independent(WalkKind.UP, [(o.stack, job(o.stack)) for o in ops])
    return rollout, rollout.run_walk(ops, walk), ran, context


def test_a_failed_gate_in_the_canary_halts_and_later_waves_never_run() -> None:
    names = ["canary", "a", "b", "c", "d"]
    policy = RolloutPolicy(parse_waves("p/canary;2;rest"))

    def work(name: str) -> StackResult:
        return deployed(name, "deployed-validation-failed" if name == "canary" else "deployed")

    rollout, results, ran, context = run(policy, names, work)
    assert ran == ["canary"]
    by = {r.stack: r for r in results}
    assert by["canary"].status == "deployed"  # up's _apply_lifecycle makes it deployed-validation-failed
    assert all(by[n].status == "skipped" and "halted at wave 1" in (by[n].error or "") for n in "abcd")
    summary = rollout.summary()
    assert summary["halted"]["wave"] == 1 and "deployed-validation-failed" in summary["halted"]["reason"]
    assert [w["state"] for w in summary["waves"]] == ["halted", "not-started", "not-started"]
    assert summary["resume_command"].endswith("--yes")
    assert set(context.executor.tags) == {"canary"}  # never a stack of a wave it did not reach
    assert context.executor.tags["canary"][TAG_STATE] == "halted"


def test_a_halt_records_its_resume_as_the_callers_renderer_spells_it() -> None:
    chosen = Rollout(waves="p/canary;rest", max_in_flight=2)
    policy = RolloutPolicy(parse_waves("p/canary;rest"), max_in_flight=2)

    def work(name: str) -> StackResult:
        return deployed(name, "deployed-mig-not-ready" if name == "canary" else "deployed")

    rollout, _, _, context = run(policy, ["canary", "a"], work, context=FakeContext(rollout=chosen))
    # The resume is a value: `up` of the whole fleet with the same waves and limit, where the run was.
    assert rollout.resume == Retry(
        Operation.UP, UpRequest(where=Where(cloud="local"), rollout=chosen), "fleet.yaml"
    )
    text = "npa-pulumi up --spec fleet.yaml --cloud local --waves 'p/canary;rest' --max-in-flight 2 --yes"
    assert rollout.summary()["resume_command"] == text  # the CLI's renderer, as the CLI gives it
    assert context.executor.tags["canary"][TAG_RESUME] == text  # what `status` elsewhere shows

    neutral = FakeContext(rollout=chosen)
    neutral.render_retry = None  # an SDK caller that gives no renderer: the neutral text, no command line
    rollout, _, _, neutral = run(policy, ["canary", "a"], work, context=neutral)
    described = "operation=up spec=fleet.yaml cloud=local waves=p/canary;rest max_in_flight=2"
    assert rollout.summary()["resume_command"] == described
    assert neutral.executor.tags["canary"][TAG_RESUME] == described


def test_waves_run_in_order_and_unchanged_clusters_pass_at_once() -> None:
    names = ["canary", "a", "b", "c"]
    order: list[str] = []

    def work(name: str) -> StackResult:
        order.append(name)
        time.sleep(0.02)
        return deployed(name)

    rollout, results, _ran, _ = run(
        RolloutPolicy(parse_waves("p/canary;p/a,p/b;rest")), names, work, unchanged=("b",)
    )
    assert order[0] == "canary" and order[-1] == "c" and set(order) == {"canary", "a", "c"}
    assert [w["state"] for w in rollout.summary()["waves"]] == ["passed"] * 3
    assert "halted" not in rollout.summary()
    assert len(results) == 3


def test_failures_k_lets_the_rollout_go_on_until_k() -> None:
    names = ["a", "b", "c", "d"]

    def work(name: str) -> StackResult:
        return op(name).result("failed", error="boom") if name == "a" else deployed(name)

    policy = RolloutPolicy(parse_waves("1;1;rest"), halt_on=HaltOn.FAILURES, halt_failures=2)
    rollout, _, ran, _ = run(policy, names, work)
    assert sorted(ran) == names and "halted" not in rollout.summary()


def test_the_per_reservation_limit_holds_inside_a_wave() -> None:
    names = [f"c{i}" for i in range(6)]
    running = 0
    most = 0
    lock = threading.Lock()

    def work(name: str) -> StackResult:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return deployed(name)

    policy = RolloutPolicy(parse_waves("rest"), max_in_flight=6, max_in_flight_per_reservation=2)
    run(policy, names, work, reservation="reservation-1")
    assert most == 2


class StatusContext:
    """What `rollout.status` reads: the spec's policy, the selected targets, the tags beside the stacks."""

    def __init__(self, tags: dict[str, dict[str, str]]) -> None:
        from npa_pulumi.plan import resolve_targets
        from npa_pulumi.spec import parse_spec

        self.spec = parse_spec(
            """
apiVersion: npa.fleet/v0.0.1
name: f
region: eu-north1
defaults: {cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
projects:
  - name: p
    clusters: [{name: canary}, {name: a}, {name: b}]
rollout:
  waves: [{clusters: [p/canary]}, {rest: true}]
"""
        )
        self.targets = resolve_targets(self.spec)
        self.request = FleetRequest()
        self.executor = self
        self._tags = tags

    def read_tags(self, op: StackOp) -> dict[str, str] | None:
        return self._tags.get(op.stack)


def test_status_shows_the_wave_in_progress_the_waiting_and_a_halt_from_the_tags() -> None:
    from npa_pulumi.engine import lifecycle
    from npa_pulumi.engine import rollout as staged

    live = lifecycle.this_run()  # this process: a run that still lives
    passed = {staged.TAG_RUN: live, staged.TAG_WAVE: "1/2", staged.TAG_STATE: "passed"}
    applying = {staged.TAG_RUN: live, staged.TAG_WAVE: "2/2", staged.TAG_STATE: "applying"}
    shown = staged.status(StatusContext({"f.p.canary": passed, "f.p.a": applying}))  # type: ignore[arg-type]
    assert shown is not None
    assert [w["state"] for w in shown["waves"]] == ["passed", "applying"] and shown["in_progress"] == 2

    waiting = staged.status(StatusContext({"f.p.canary": {**passed, staged.TAG_STATE: "applying"}}))  # type: ignore[arg-type]
    assert waiting is not None and [w["state"] for w in waiting["waves"]] == ["applying", "waiting"]

    halted = {
        **passed,
        staged.TAG_STATE: "halted",
        staged.TAG_REASON: "wave 1: p/canary (deployed-validation-failed)",
        staged.TAG_RESUME: "npa-pulumi up --spec fleet.yaml --cloud local --yes",
    }
    stopped = staged.status(StatusContext({"f.p.canary": halted}))  # type: ignore[arg-type]
    assert stopped is not None
    assert [w["state"] for w in stopped["waves"]] == ["halted", "not-started"]
    assert stopped["halted"]["wave"] == 1 and stopped["resume_command"].endswith("--yes")
