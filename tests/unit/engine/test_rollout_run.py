"""The rollout on the scheduler (engine/rollout.py), with plain functions as the stacks' work: a wave starts
only after the previous one passed, a failed health gate (the `lifecycle` its stack recorded) halts it and
later waves never run, unchanged clusters pass at once, the per-reservation limit holds, and the waves'
states are recorded as tags on the stacks that ran only. Health is a fake reader: a cluster under
maintenance or with a NebiusGPUError node is held while the others proceed (or taken with
--ignore-maintenance, or halts the rollout with `halt_on: maintenance`), and a wave's soak reads its
clusters' health on a fake clock until it is over or one of them is not clean."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from npa_pulumi.cli.retry_commands import render_retry
from npa_pulumi.engine.automation import StackOp
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.graph import WalkKind, independent
from npa_pulumi.engine.requests import FleetRequest, Rollout, UpRequest, Where
from npa_pulumi.engine.retries import Operation, RenderRetry, Retry
from npa_pulumi.engine.rollout import TAG_REASON, TAG_RESUME, TAG_STATE, RolloutRun
from npa_pulumi.errors import NpaError
from npa_pulumi.output.health import ClusterHealth, GpuTotals, Maintenance, NodeCondition, NodeHealth
from npa_pulumi.output.progress import Progress
from npa_pulumi.output.results import StackResult
from npa_pulumi.plan.rollout import (
    HaltOn,
    RolloutMember,
    RolloutPolicy,
    WaveRule,
    approval_reason,
    assign_waves,
    parse_waves,
)


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

    def __init__(
        self, concurrency: int = 4, ignore_maintenance: bool = False, rollout: Rollout | None = None
    ) -> None:
        rollout = rollout or Rollout(ignore_maintenance=ignore_maintenance)
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


def clean(stack: str) -> ClusterHealth:
    node = NodeHealth(name=f"{stack}-gpu-0", gpu=True, state="usable", ready=True, qualification="gate")
    return ClusterHealth(
        stack=stack,
        project_key="p",
        cluster_name=stack,
        kube_context=f"ctx-{stack}",
        status="ok",
        totals=GpuTotals(requested=8, usable=8),
        nodes=[node],
    )


def under_maintenance(stack: str, reason: str = "HW_GPU_XID_79") -> ClusterHealth:
    found = clean(stack)
    node = found.nodes[0]
    node.state = "maintenance"
    node.maintenance = [Maintenance(id="computemaintenance-1", reason=reason, node=node.name, cluster=stack)]
    return found


def gpu_error(stack: str) -> ClusterHealth:
    found = clean(stack)
    node = found.nodes[0]
    node.state = "degraded"
    node.conditions = [NodeCondition(type="NebiusGPUError", status="True", message="XID 79 on GPU 3")]
    node.problems = ["NebiusGPUError: XID 79 on GPU 3"]
    return found


class FakeHealth:
    """The health reader: what each stack's read says (by call, when a list is given), and every call."""

    def __init__(self, says: dict[str, Any] | None = None, error: str | None = None) -> None:
        self.says = says or {}
        self.error = error
        self.calls: list[tuple[list[str], bool]] = []
        self.lock = threading.Lock()

    def __call__(self, stacks: Any, refresh: bool) -> dict[str, ClusterHealth]:
        with self.lock:
            self.calls.append((list(stacks), refresh))
            if self.error:
                raise NpaError(self.error)
            found = {}
            for stack in stacks:
                said = self.says.get(stack, clean)
                if isinstance(said, list):  # one per read of that stack, the last repeated
                    reads = sum(1 for called, _ in self.calls if stack in called)
                    said = said[min(reads, len(said)) - 1]
                found[stack] = said(stack)
            return found


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def run(
    policy: RolloutPolicy,
    names: list[str],
    work: Callable[[str], StackResult],
    reservation: str = "",
    unchanged: tuple[str, ...] = (),
    health: FakeHealth | None = None,
    ignore_maintenance: bool = False,
    clock: FakeClock | None = None,
    context: FakeContext | None = None,
) -> tuple[RolloutRun, list[StackResult], list[str], FakeContext]:
    context = context or FakeContext(ignore_maintenance=ignore_maintenance)
    plan = assign_waves(policy, members(*names, reservation=reservation))
    clock = clock or FakeClock()
    rollout = RolloutRun(
        context,  # type: ignore[arg-type]
        plan,
        health=health or FakeHealth(),
        sleep=clock.sleep,
        clock=clock.clock,
    )
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


# ------------------------------------------------------------------------------ maintenance and soak


def test_a_cluster_under_maintenance_is_held_and_the_others_proceed() -> None:
    names = ["canary", "a", "b", "c"]
    health = FakeHealth({"b": under_maintenance, "c": gpu_error})
    rollout, results, ran, context = run(
        RolloutPolicy(parse_waves("p/canary;2;rest")), names, deployed, health=health
    )
    assert sorted(ran) == ["a", "canary"]  # b (maintenance) and c (NebiusGPUError) never started
    by = {r.stack: r for r in results}
    assert by["b"].status == "held" and "HW_GPU_XID_79" in (by["b"].error or "")
    assert by["c"].status == "held" and "NebiusGPUError" in (by["c"].error or "")
    assert not any(r.failed for r in results)
    summary = rollout.summary()
    assert "halted" not in summary
    assert [w["state"] for w in summary["waves"]] == ["passed"] * 3
    assert summary["waves"][1]["held"] == {
        "p/b": "maintenance HW_GPU_XID_79 on node b-gpu-0 (computemaintenance-1)"
    }
    assert "node c-gpu-0: NebiusGPUError (XID 79 on GPU 3)" in summary["waves"][2]["held"]["p/c"]
    # Its tags say it was held and why; its resources were not touched (it ran nothing).
    assert context.executor.tags["b"][TAG_STATE] == "held"
    assert "HW_GPU_XID_79" in context.executor.tags["b"][TAG_REASON]
    assert context.executor.tags["a"][TAG_STATE] == "passed"
    # One read per wave, of the wave's scheduled clusters, before its first one started.
    assert [sorted(stacks) for stacks, _ in health.calls] == [["canary"], ["a", "b"], ["c"]]


def test_ignore_maintenance_takes_the_cluster_and_says_so() -> None:
    health = FakeHealth({"b": under_maintenance})
    rollout, results, ran, _ = run(
        RolloutPolicy(parse_waves("1;rest")), ["a", "b"], deployed, health=health, ignore_maintenance=True
    )
    assert sorted(ran) == ["a", "b"]
    assert all(r.status == "deployed" for r in results)
    wave = rollout.summary()["waves"][1]
    assert "held" not in wave and "HW_GPU_XID_79" in wave["taken_under_maintenance"]["p/b"]
    resumed = rollout.resume.request
    assert isinstance(resumed, UpRequest) and resumed.rollout.ignore_maintenance
    assert "--ignore-maintenance" in rollout.resume_text


def test_halt_on_maintenance_halts_at_the_held_clusters_wave() -> None:
    policy = RolloutPolicy(parse_waves("2;rest"), halt_on_maintenance=True)
    health = FakeHealth({"b": under_maintenance})
    rollout, results, ran, _ = run(policy, ["a", "b", "c", "d"], deployed, health=health)
    assert ran == ["a"]
    by = {r.stack: r for r in results}
    assert by["b"].status == "held"
    assert all(by[n].status == "skipped" and "halted at wave 1" in (by[n].error or "") for n in "cd")
    summary = rollout.summary()
    assert summary["halted"]["wave"] == 1
    assert "p/b held" in summary["halted"]["reason"] and "halt_on maintenance" in summary["halted"]["reason"]


def test_a_health_read_that_fails_holds_nothing() -> None:
    health = FakeHealth(error="the cloud is unreachable")
    rollout, results, ran, _ = run(RolloutPolicy(parse_waves("1;rest")), ["a", "b"], deployed, health=health)
    assert sorted(ran) == ["a", "b"] and all(r.status == "deployed" for r in results)
    assert "halted" not in rollout.summary()


def _soaked(wave_soak_s: float, rest: str = "rest") -> RolloutPolicy:
    first, *others = parse_waves(f"1;{rest}")
    return RolloutPolicy((WaveRule(first.kind, number=first.number, soak_s=wave_soak_s), *others))


def test_a_clean_soak_keeps_the_next_wave_waiting_until_it_is_over() -> None:
    clock = FakeClock()
    order: list[tuple[str, float]] = []

    def work(name: str) -> StackResult:
        order.append((name, clock.now))
        return deployed(name)

    health = FakeHealth()
    rollout, results, ran, _context = run(_soaked(120), ["a", "b"], work, health=health, clock=clock)
    assert ran == ["a", "b"] and all(r.status == "deployed" for r in results)
    started = dict(order)
    assert started["b"] - started["a"] >= 120  # wave 2 started once the 2-minute soak was over
    soak = rollout.summary()["waves"][0]["soak"]
    assert soak["clean"] is True and soak["reads"] == 7 and soak["elapsed_s"] == 120  # at 0, every 20 s
    assert clock.slept == [20.0] * 6
    soak_reads = [c for c in health.calls if c[0] == ["a"]][1:]  # the first call is wave 1's hold read
    assert soak_reads[0] == (["a"], True) and all(not fresh for _, fresh in soak_reads[1:])
    assert "soaking" not in rollout.summary()["waves"][0]["state"]


def test_a_cluster_degraded_during_the_soak_halts_the_rollout() -> None:
    # a: clean at the hold read and the first soak read, then NebiusGPUError
    health = FakeHealth({"a": [clean, clean, gpu_error]})
    rollout, results, ran, context = run(_soaked(600), ["a", "b", "c"], deployed, health=health)
    assert ran == ["a"]
    by = {r.stack: r for r in results}
    assert by["a"].status == "deployed"
    assert all(by[n].status == "skipped" and "halted at wave 1" in (by[n].error or "") for n in "bc")
    summary = rollout.summary()
    reason = summary["halted"]["reason"]
    assert "soak" in reason and "p/a" in reason and "NebiusGPUError" in reason, reason
    assert summary["waves"][0]["state"] == "halted"
    assert summary["waves"][0]["soak"]["clean"] is False and summary["waves"][0]["soak"]["reads"] == 2
    assert context.executor.tags["a"][TAG_STATE] == "halted"


def test_a_soak_whose_health_cannot_be_read_fails_closed() -> None:
    calls = 0

    class FailsInSoak(FakeHealth):
        def __call__(self, stacks: Any, refresh: bool) -> dict[str, ClusterHealth]:
            nonlocal calls
            calls += 1
            if calls > 1:
                raise NpaError("API unreachable")
            return super().__call__(stacks, refresh)

    rollout, _, ran, _ = run(_soaked(60), ["a", "b"], deployed, health=FailsInSoak())
    assert ran == ["a"] and "health not read: API unreachable" in rollout.summary()["halted"]["reason"]


def test_no_soak_for_the_last_wave_nor_a_wave_that_deployed_nothing() -> None:
    clock = FakeClock()
    rule = WaveRule(parse_waves("rest")[0].kind, soak_s=600)
    run(RolloutPolicy((rule,)), ["a"], deployed, clock=clock)
    assert clock.slept == []  # nothing waits for the last wave

    rollout, _, ran, _ = run(_soaked(600), ["a", "b"], deployed, unchanged=("a",), clock=clock)
    assert ran == ["b"] and clock.slept == []
    assert rollout.summary()["waves"][0]["soak"]["skipped"] == "no cluster deployed"


def test_the_preview_marks_the_clusters_an_up_would_hold_but_not_the_unchanged() -> None:
    from npa_pulumi.engine.rollout import mark_holds, soak_poll_s

    plan = assign_waves(RolloutPolicy(parse_waves("1;rest")), members("a", "b", "c"))
    document = plan.to_json()
    health = FakeHealth({"b": under_maintenance, "c": gpu_error})
    results = [op("a").result("changes"), op("b").result("changes"), op("c").result("no-changes")]
    mark_holds(document, plan, health, results, ignore_maintenance=False)
    assert health.calls == [(["a", "b"], False)]  # one read; the unchanged cluster is not read
    assert "held" not in document["waves"][0]
    assert list(document["waves"][1]["held"]) == ["p/b"]
    taken = plan.to_json()
    mark_holds(taken, plan, FakeHealth({"b": under_maintenance}), results, ignore_maintenance=True)
    assert "HW_GPU_XID_79" in taken["waves"][1]["taken_under_maintenance"]["p/b"]
    unread = plan.to_json()
    mark_holds(unread, plan, FakeHealth(error="no credentials"), results, ignore_maintenance=False)
    assert "no credentials" in unread["health_error"]
    assert (soak_poll_s(6), soak_poll_s(120), soak_poll_s(3600)) == (1.0, 20.0, 30.0)


def test_status_shows_a_held_cluster_and_its_wave_passed() -> None:
    from npa_pulumi.engine import rollout as staged

    done = "elsewhere/1/2026-01-01T00:00:00+00:00"  # a run that is over
    passed = {staged.TAG_RUN: done, staged.TAG_WAVE: "1/2", staged.TAG_STATE: "passed"}
    held = {
        staged.TAG_RUN: done,
        staged.TAG_WAVE: "2/2",
        staged.TAG_STATE: "held",
        staged.TAG_REASON: "maintenance HW_GPU_XID_79 on node n1 (ev-1)",
    }
    later = {**passed, staged.TAG_WAVE: "2/2"}
    shown = staged.status(StatusContext({"f.p.canary": passed, "f.p.a": held, "f.p.b": later}))  # type: ignore[arg-type]
    assert shown is not None
    assert [w["state"] for w in shown["waves"]] == ["passed", "passed"]
    assert shown["waves"][1]["held"] == {"p/a": "maintenance HW_GPU_XID_79 on node n1 (ev-1)"}


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


# ------------------------------------------------------------------------- a wave that vouches for nothing


def test_a_canary_wave_all_held_does_not_open_the_next_wave() -> None:
    health = FakeHealth({"canary": gpu_error})
    rollout, results, ran, context = run(
        RolloutPolicy(parse_waves("p/canary;1;rest")), ["canary", "a", "b"], deployed, health=health
    )
    assert ran == []  # the canary held, nothing of the later waves started
    by = {r.stack: r for r in results}
    assert by["canary"].status == "held" and "NebiusGPUError" in (by["canary"].error or "")
    assert all(by[n].status == "skipped" and "waits at wave 1" in (by[n].error or "") for n in "ab")
    summary = rollout.summary()
    assert "halted" not in summary
    assert summary["waiting"]["wave"] == 1
    assert "p/canary: node canary-gpu-0: NebiusGPUError" in summary["waiting"]["reason"]
    assert [w["state"] for w in summary["waves"]] == ["waiting"] * 3
    assert summary["resume_command"] == rollout.resume_text
    assert set(context.executor.tags) == {"canary"}  # no later stack was touched, not even tagged
    assert context.executor.tags["canary"][TAG_STATE] == "held"


def test_a_wave_with_one_cluster_applied_vouches_and_the_last_wave_waits_for_nothing() -> None:
    health = FakeHealth({"a": under_maintenance, "c": under_maintenance})
    rollout, _, ran, _ = run(RolloutPolicy(parse_waves("2;rest")), ["a", "b", "c"], deployed, health=health)
    assert sorted(ran) == ["b"]  # a and c held; b vouched for wave 1; c, held alone, is the last wave
    summary = rollout.summary()
    assert "waiting" not in summary and "halted" not in summary
    assert [w["state"] for w in summary["waves"]] == ["passed", "passed"]


def test_an_unchanged_cluster_vouches_for_its_wave() -> None:
    health = FakeHealth({"a": under_maintenance})
    rollout, _, ran, _ = run(
        RolloutPolicy(parse_waves("2;rest")), ["a", "b", "c"], deployed, unchanged=("b",), health=health
    )
    assert ran == ["c"] and "waiting" not in rollout.summary()


def test_ignore_maintenance_takes_a_held_canary_and_the_rollout_goes_on() -> None:
    health = FakeHealth({"canary": gpu_error})
    rollout, results, ran, _ = run(
        RolloutPolicy(parse_waves("p/canary;rest")),
        ["canary", "a"],
        deployed,
        health=health,
        ignore_maintenance=True,
    )
    assert sorted(ran) == ["a", "canary"] and all(r.status == "deployed" for r in results)
    assert "waiting" not in rollout.summary()


def test_status_shows_an_all_held_wave_waiting_and_the_later_waves_waiting_behind_it() -> None:
    from npa_pulumi.engine import rollout as staged

    done = "elsewhere/1/2026-01-01T00:00:00+00:00"  # a run that is over
    held = {
        staged.TAG_RUN: done,
        staged.TAG_WAVE: "1/2",
        staged.TAG_STATE: "held",
        staged.TAG_REASON: "node n1: NebiusGPUError (XID 79)",
    }
    shown = staged.status(StatusContext({"f.p.canary": held}))  # type: ignore[arg-type]
    assert shown is not None
    assert [w["state"] for w in shown["waves"]] == ["waiting", "waiting"]
    assert shown["waiting"] == {"wave": 1, "held": {"p/canary": "node n1: NebiusGPUError (XID 79)"}}
    assert "halted" not in shown and "in_progress" not in shown


# --- approvals between waves (`rollout.approval`) and clusters left pending for a window (issue 58) ------
# Wave N starts only once M identities other than the run's approved it; the run's own approval never
# counts; a wave of pending clusters vouches for nothing.

RUN = "ci-deployer"


def _run(
    policy: RolloutPolicy, names: list[str], approvers: list[str], pending: tuple[str, ...] = ()
) -> tuple[RolloutRun, list[StackResult], list[str], list[int]]:
    asked: list[int] = []

    def approvals(wave: int) -> tuple[list[str], str]:
        asked.append(wave)
        return approvers, RUN

    clock = FakeClock()
    rollout = RolloutRun(
        FakeContext(),  # type: ignore[arg-type]
        assign_waves(policy, members(*names)),
        health=FakeHealth(),
        sleep=clock.sleep,
        clock=clock.clock,
        approvals=approvals,
    )
    ran: list[str] = []

    def work(name: str) -> StackResult:
        ran.append(name)
        if name in pending:
            return op(name).result("pending", pending={"reason": "outside its maintenance windows"})
        return deployed(name)

    def job(name: str) -> Callable[[], StackResult]:
        return lambda: work(name)

    ops = [op(n) for n in names]
    walk = independent(WalkKind.UP, [(o.stack, job(o.stack)) for o in ops])
    return rollout, rollout.run_walk(ops, walk), ran, asked


GATED = dataclasses.replace(RolloutPolicy(parse_waves("p/canary;rest")), approval_before=2, approval_min=1)


def test_the_next_wave_waits_for_an_approval_by_another_identity() -> None:
    rollout, results, ran, asked = _run(GATED, ["canary", "a", "b"], approvers=[])
    assert ran == ["canary"] and asked == [2]
    by = {r.stack: r for r in results}
    assert by["canary"].status == "deployed"
    assert all(by[n].status == "skipped" and "waits for 1 approval" in (by[n].error or "") for n in "ab")
    summary = rollout.summary()
    assert summary["waiting"]["wave"] == 2 and "npa-pulumi approve" in summary["waiting"]["reason"]
    assert [w["state"] for w in summary["waves"]] == ["passed", "waiting"]


def test_the_runs_own_approval_does_not_count() -> None:
    _, _, ran, _ = _run(GATED, ["canary", "a"], approvers=[RUN, RUN])
    assert ran == ["canary"]


def test_an_approval_by_someone_else_opens_the_wave() -> None:
    rollout, _, ran, _ = _run(GATED, ["canary", "a", "b"], approvers=[RUN, "alice"])
    assert sorted(ran) == ["a", "b", "canary"]
    assert "waiting" not in rollout.summary()


def test_approval_reason_counts_distinct_other_identities() -> None:
    policy = dataclasses.replace(GATED, approval_min=2)
    assert approval_reason(policy, 2, ["alice", "alice", RUN], RUN) is not None
    assert approval_reason(policy, 2, ["alice", "bob"], RUN) is None
    assert approval_reason(policy, 3, [], RUN) is None  # another wave: no approval asked


def test_a_wave_of_pending_clusters_vouches_for_nothing() -> None:
    policy = RolloutPolicy(parse_waves("p/canary;rest"))
    rollout, results, ran, _ = _run(policy, ["canary", "a"], approvers=[], pending=("canary",))
    assert ran == ["canary"]
    by = {r.stack: r for r in results}
    assert by["canary"].status == "pending" and by["a"].status == "skipped"
    assert rollout.summary()["waiting"]["wave"] == 1
