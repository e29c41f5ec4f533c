"""The one scheduler (engine/scheduler.py), over an in-memory executor: the ordering rules of up (a
project's clusters start as soon as that project is done, never behind other projects), destroy (a project
waits for its clusters), blocking, fail-fast, concurrency and per-group limits, without an engine."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import pytest

from npa_pulumi.engine.scheduler import Job, Scheduler
from npa_pulumi.errors import NpaError


@dataclass
class Executor:
    """Records when each job starts and ends; a job's work sleeps as long as told and fails when told."""

    durations: dict[str, float] = field(default_factory=dict)
    failing: set[str] = field(default_factory=set)
    events: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    running: int = 0
    peak: int = 0
    group_running: dict[str, int] = field(default_factory=dict)
    group_peak: dict[str, int] = field(default_factory=dict)

    def work(self, key: str, group: str | None = None) -> Callable[[], str]:
        def run() -> str:
            with self.lock:
                self.events.append(("start", key))
                self.running += 1
                self.peak = max(self.peak, self.running)
                if group:
                    self.group_running[group] = self.group_running.get(group, 0) + 1
                    self.group_peak[group] = max(self.group_peak.get(group, 0), self.group_running[group])
            time.sleep(self.durations.get(key, 0.01))
            with self.lock:
                self.events.append(("end", key))
                self.running -= 1
                if group:
                    self.group_running[group] -= 1
            if key in self.failing:
                raise NpaError(f"{key} broke")
            return f"ok:{key}"

        return run

    def index(self, kind: str, key: str) -> int:
        return self.events.index((kind, key))

    def started(self) -> list[str]:
        return [key for kind, key in self.events if kind == "start"]


def scheduler(concurrency: int = 4, fail_fast: bool = False, **limits: int) -> Scheduler[str]:
    group_limits: dict[Hashable, int] = {name: limit for name, limit in limits.items()}
    return Scheduler(
        concurrency=concurrency,
        is_failure=lambda result: result.startswith(("failed", "blocked")),
        failed=lambda key, error: f"failed:{key}:{error}",
        skipped=lambda key: f"skipped:{key}",
        fail_fast=fail_fast,
        limits=group_limits,
    )


def forward(ex: Executor, projects: dict[str, list[str]]) -> list[Job[str]]:
    """up's graph: each project, then its clusters (blocked when the project failed)."""
    jobs = [Job(p, ex.work(p)) for p in projects]
    for project, clusters in projects.items():
        for cluster in clusters:
            jobs.append(Job(cluster, ex.work(cluster), after=(project,), blocked=lambda k: f"blocked:{k}"))
    return jobs


def test_a_projects_clusters_start_as_soon_as_it_is_done_not_behind_other_projects() -> None:
    ex = Executor(durations={"slow": 0.6, "fast": 0.05})
    outcome = scheduler(concurrency=4).run(forward(ex, {"slow": ["slow/a"], "fast": ["fast/a", "fast/b"]}))
    assert outcome.results["fast/a"] == "ok:fast/a"
    # No barrier: the fast project's clusters ran while the slow project was still running.
    assert ex.index("start", "fast/a") < ex.index("end", "slow")
    assert ex.index("start", "fast/b") < ex.index("end", "slow")
    # ... and a cluster never starts before its own project is done.
    assert ex.index("end", "slow") < ex.index("start", "slow/a")
    assert ex.index("end", "fast") < ex.index("start", "fast/a")


def test_a_failed_project_blocks_only_its_own_clusters() -> None:
    ex = Executor(failing={"bad"})
    jobs = forward(ex, {"bad": ["bad/a", "bad/b"], "good": ["good/a"]})
    outcome = scheduler().run(jobs)
    assert outcome.results["bad"].startswith("failed:bad:bad broke")
    assert outcome.results["bad/a"] == "blocked:bad" and outcome.results["bad/b"] == "blocked:bad"
    assert outcome.results["good/a"] == "ok:good/a"
    assert "bad/a" not in ex.started() and "bad/b" not in ex.started()
    # Results come back in the order the jobs were given, whatever order they finished in.
    assert outcome.ordered(jobs) == [outcome.results[j.key] for j in jobs]


def test_a_block_travels_down_a_chain() -> None:
    ex = Executor(failing={"a"})
    jobs = [
        Job("a", ex.work("a")),
        Job("b", ex.work("b"), after=("a",), blocked=lambda k: f"blocked:{k}"),
        Job("c", ex.work("c"), after=("b",), blocked=lambda k: f"blocked:{k}"),
    ]
    outcome = scheduler().run(jobs)
    assert outcome.results == {"a": "failed:a:a broke", "b": "blocked:a", "c": "blocked:b"}
    assert ex.started() == ["a"]


def test_destroy_runs_backward_a_project_waits_for_all_its_clusters() -> None:
    ex = Executor(durations={"p/a": 0.3, "p/b": 0.05, "q/a": 0.05})
    jobs = [Job(c, ex.work(c)) for c in ("p/a", "p/b", "q/a")]
    jobs += [Job("p", ex.work("p"), after=("p/a", "p/b")), Job("q", ex.work("q"), after=("q/a",))]
    scheduler().run(jobs)
    assert ex.index("end", "p/a") < ex.index("start", "p") and ex.index("end", "p/b") < ex.index("start", "p")
    # q's clusters are gone early: q does not wait for p's slow cluster.
    assert ex.index("start", "q") < ex.index("end", "p/a")


def test_a_job_without_a_blocked_result_runs_after_a_failed_dependency() -> None:
    """destroy's project phases decide themselves what a failed cluster blocks (they mark it)."""
    ex = Executor(failing={"p/a"})
    jobs = [Job("p/a", ex.work("p/a")), Job("p", ex.work("p"), after=("p/a",))]
    outcome = scheduler().run(jobs)
    assert outcome.results["p"] == "ok:p"
    assert ex.index("end", "p/a") < ex.index("start", "p")


def test_fail_fast_starts_nothing_after_the_first_failure() -> None:
    ex = Executor(failing={"x"}, durations={"x": 0.01})
    jobs = [Job(k, ex.work(k)) for k in ("x", "y", "z")]
    outcome = scheduler(concurrency=1, fail_fast=True).run(jobs)
    assert outcome.results == {"x": "failed:x:x broke", "y": "skipped:y", "z": "skipped:z"}
    assert ex.started() == ["x"]


def test_continue_on_error_runs_everything_else() -> None:
    ex = Executor(failing={"x"})
    outcome = scheduler(concurrency=1).run([Job(k, ex.work(k)) for k in ("x", "y", "z")])
    assert outcome.results["y"] == "ok:y" and outcome.results["z"] == "ok:z"


@pytest.mark.parametrize("concurrency", [1, 2, 3])
def test_never_more_than_concurrency_jobs_at_once(concurrency: int) -> None:
    ex = Executor(durations={k: 0.05 for k in "abcdefg"})
    scheduler(concurrency=concurrency).run([Job(k, ex.work(k)) for k in "abcdefg"])
    assert ex.peak == concurrency


def test_a_group_limit_holds_while_other_groups_run() -> None:
    ex = Executor(durations={k: 0.05 for k in ["r1", "r2", "r3", "r4", "o1", "o2"]})
    jobs = [Job(k, ex.work(k, "block"), group="block") for k in ["r1", "r2", "r3", "r4"]]
    jobs += [Job(k, ex.work(k, "other"), group="other") for k in ["o1", "o2"]]
    scheduler(concurrency=6, block=2).run(jobs)
    assert ex.group_peak["block"] == 2
    assert ex.group_peak["other"] == 2  # no limit named: only the overall concurrency


def test_ready_jobs_start_in_the_order_given() -> None:
    ex = Executor()
    scheduler(concurrency=1).run([Job(k, ex.work(k)) for k in ("c", "a", "b")])
    assert ex.started() == ["c", "a", "b"]


def test_an_unexpected_exception_is_that_jobs_failure() -> None:
    def boom() -> str:
        raise RuntimeError("disk on fire")

    outcome = scheduler().run([Job("a", boom), Job("b", lambda: "ok:b")])
    assert outcome.results["a"] == "failed:a:RuntimeError: disk on fire"
    assert outcome.results["b"] == "ok:b"


def test_a_dependency_outside_the_run_is_ignored() -> None:
    """A cluster whose project stack is unchanged (no job) starts at once."""
    ex = Executor()
    outcome = scheduler().run([Job("c", ex.work("c"), after=("unchanged-project",))])
    assert outcome.results["c"] == "ok:c"


def test_a_full_group_holds_back_only_its_own_jobs_which_keep_their_order() -> None:
    ex = Executor(durations={"b1": 0.05, "b2": 0.05, "b3": 0.05, "x1": 0.3})
    jobs = [Job(k, ex.work(k, "block"), group="block") for k in ("b1", "b2", "b3")]
    jobs.append(Job("x1", ex.work("x1")))
    scheduler(concurrency=2, block=1).run(jobs)
    assert ex.started() == ["b1", "x1", "b2", "b3"]
    assert ex.group_peak["block"] == 1


def test_a_fleet_of_thousands_blocks_exactly_the_failed_projects_clusters() -> None:
    projects = {f"p{p}": [f"p{p}.c{c}" for c in range(50)] for p in range(40)}
    ex = Executor(durations=dict.fromkeys([c for cs in projects.values() for c in cs], 0.0), failing={"p7"})
    outcome = scheduler(concurrency=8).run(forward(ex, projects))
    assert len(outcome.results) == 40 + 2000
    assert outcome.results["p7"] == "failed:p7:p7 broke"
    assert all(outcome.results[c] == "blocked:p7" for c in projects["p7"])
    others = [c for p, cs in projects.items() if p != "p7" for c in [p, *cs]]
    assert all(outcome.results[k] == f"ok:{k}" for k in others)
    assert set(ex.started()) == set(others) | {"p7"}
    for project, clusters in projects.items():
        if project != "p7":
            assert ex.index("end", project) < min(ex.index("start", c) for c in clusters)


def _reference(jobs: list[Job[str]], failing: set[str], fail_fast: bool) -> tuple[dict[str, str], list[str]]:
    """The scheduler's rules (the module's docstring) run one job at a time, by rescanning every job."""
    known = {job.key for job in jobs}
    waiting, done, bad = list(jobs), set(), set()
    results: dict[str, str] = {}
    order: list[str] = []
    stop = False
    while True:
        changed = True
        while changed:
            changed = False
            for job in list(waiting):
                culprit = next((k for k in job.after if k in bad), None)
                if culprit is None or job.blocked is None:
                    continue
                if any(k in known and k not in done for k in job.after if k not in bad):
                    continue
                waiting.remove(job)
                results[job.key] = job.blocked(culprit)
                done.add(job.key)
                bad.add(job.key)
                changed = True
        ready = [j for j in waiting if not any(k in known and k not in done for k in j.after)]
        if stop or not ready:
            break
        job = ready[0]
        waiting.remove(job)
        order.append(job.key)
        results[job.key] = f"failed:{job.key}:{job.key} broke" if job.key in failing else f"ok:{job.key}"
        done.add(job.key)
        if job.key in failing:
            bad.add(job.key)
            stop = fail_fast
    for job in waiting:
        results[job.key] = f"skipped:{job.key}"
    return results, order


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs_follow_the_rules_one_job_at_a_time(seed: int) -> None:
    """Random DAGs (with dependencies outside the run, jobs with and without a blocked result, failures,
    fail-fast or not) against the rules run one job at a time by rescanning every job."""
    import random

    rng = random.Random(seed)
    keys = [f"j{n}" for n in range(rng.randint(5, 60))]
    failing = {k for k in keys if rng.random() < 0.15}
    ex = Executor(durations=dict.fromkeys(keys, 0.0), failing=failing)
    jobs: list[Job[str]] = []
    for n, key in enumerate(keys):
        after = tuple(rng.sample(keys[:n], min(n, rng.randint(0, 3))))
        after += ("outside",) if rng.random() < 0.1 else ()
        blocked = (lambda culprit: f"blocked:{culprit}") if rng.random() < 0.7 else None
        jobs.append(Job(key, ex.work(key), after=after, blocked=blocked))
    rng.shuffle(jobs)  # the order given is not the order of dependence
    fail_fast = rng.random() < 0.3
    outcome = scheduler(concurrency=1, fail_fast=fail_fast).run(jobs)
    assert (outcome.results, outcome.order) == _reference(jobs, failing, fail_fast)
