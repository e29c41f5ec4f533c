"""The fleet graph (engine/graph.py) with a fake executor: each node's work is a recording function, so the
walks' ordering, skipping, blocking, stage, shard and wave rules are checked without an engine."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from npa_pulumi.engine.graph import (
    PROJECT_PHASES,
    FleetGraph,
    Share,
    Skip,
    Stage,
    Visit,
    Walk,
    WalkKind,
    WaveArrangement,
    barrier_key,
    independent,
    parallel,
    parse_stage,
)
from npa_pulumi.engine.plans import FleetPlans
from npa_pulumi.engine.programs import ClusterPlan, ProjectPlan
from npa_pulumi.engine.scheduler import Scheduler
from npa_pulumi.errors import UserInputError
from npa_pulumi.spec.constants import BackendKind


@dataclass
class Result:
    key: str
    status: str = "done"


@dataclass
class FakeExecutor:
    """Runs a walk's jobs: records when each node started and finished, fails the nodes it is told to."""

    fail: set[str] = field(default_factory=set)
    slow: dict[str, float] = field(default_factory=dict)
    events: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    running: int = 0
    most_at_once: int = 0
    # A job holds (up to 2 s) until this many run at once: concurrency shown without timing luck.
    hold_until_running: int = 0

    def work(self, key: str, note: str = "") -> Result:
        with self.lock:
            self.events.append(("start", key + note))
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        held = time.monotonic() + 2.0
        while self.running < self.hold_until_running and time.monotonic() < held:
            time.sleep(0.005)
        time.sleep(self.slow.get(key, 0.005))
        with self.lock:
            self.events.append(("end", key + note))
            self.running -= 1
        return Result(key, "failed" if key in self.fail else "done")

    def visit(self) -> Visit[Result]:
        return Visit(
            project=lambda plan: self.work(plan.stack),  # a destroy's phases: keyed project:<stack>
            cluster=lambda plan, behind: self.work(plan.stack, "+behind" if behind else ""),
            blocked=lambda plan, culprit: Result(plan.stack, f"blocked by {culprit}"),
            unchanged=lambda plan: Result(plan.stack, "unchanged"),
        )

    def scheduler(self, concurrency: int = 4, fail_fast: bool = False) -> Scheduler[Result]:
        return Scheduler(
            concurrency=concurrency,
            is_failure=lambda r: r.status == "failed",
            failed=lambda key, error: Result(key, "failed"),
            skipped=lambda key: Result(key, "skipped"),
            fail_fast=fail_fast,
        )

    def started(self, key: str) -> int:
        return next(i for i, (what, k) in enumerate(self.events) if what == "start" and _is(k, key))

    def ended(self, key: str) -> int:
        return next(i for i, (what, k) in enumerate(self.events) if what == "end" and _is(k, key))

    def ran(self) -> list[str]:
        return [k for what, k in self.events if what == "start"]


def _is(recorded: str, key: str) -> bool:
    return recorded in (key, f"{key}+behind")


def fleet(projects: dict[str, list[str]]) -> FleetPlans:
    """Plans of a fleet `f`: project `p` -> its clusters."""
    plans = FleetPlans()
    for project, clusters in projects.items():
        stack = f"f.{project}"
        plans.projects.append(ProjectPlan("f", project, project, None, "r", "t", stack))
        for cluster in clusters:
            plans.clusters.append(
                ClusterPlan("f", project, stack, cluster, f"{stack}.{cluster}", "r", "t", BackendKind.MK8S)
            )
    return plans


TWO = {"a": ["x", "y"], "b": ["z"]}


def statuses(results: list[Result]) -> dict[str, str]:
    return {r.key: r.status for r in results}


# ------------------------------------------------------------------------------------------ forward


def test_up_walks_forward_each_cluster_after_its_own_project_only() -> None:
    fake = FakeExecutor(slow={"f.a": 0.2})
    walk = FleetGraph(fleet(TWO)).forward(WalkKind.UP, fake.visit())
    results = walk.run(fake.scheduler())
    assert statuses(results) == dict.fromkeys(["f.a", "f.b", "f.a.x", "f.a.y", "f.b.z"], "done")
    for cluster, project in (("f.a.x", "f.a"), ("f.a.y", "f.a"), ("f.b.z", "f.b")):
        assert fake.started(cluster) > fake.ended(project)
    # No barrier behind every project: b's cluster starts while a (slow) is still running.
    assert fake.started("f.b.z") < fake.ended("f.a")
    assert all(k.endswith("+behind") for k in fake.ran() if k.count(".") == 2)
    assert [r.key for r in results] == ["f.a", "f.b", "f.a.x", "f.a.y", "f.b.z"]  # graph order


def test_a_failed_project_blocks_only_its_own_clusters() -> None:
    fake = FakeExecutor(fail={"f.a"})
    results = statuses(FleetGraph(fleet(TWO)).forward(WalkKind.UP, fake.visit()).run(fake.scheduler()))
    assert results["f.a"] == "failed"
    assert results["f.a.x"] == results["f.a.y"] == "blocked by f.a"
    assert results["f.b.z"] == "done"
    assert "f.a.x" not in " ".join(fake.ran())  # never attempted


def test_unchanged_nodes_are_settled_and_a_cluster_behind_a_running_project_is_rechecked() -> None:
    fake = FakeExecutor()
    skip = Skip(projects=frozenset({"f.b"}), clusters=frozenset({"f.a.x", "f.b.z"}))
    walk = FleetGraph(fleet(TWO)).forward(WalkKind.UP, fake.visit(), skip)
    assert [r.key for r in walk.settled] == ["f.b", "f.b.z"]  # b is unchanged, and so is its cluster
    results = statuses(walk.run(fake.scheduler()))
    assert results["f.b"] == results["f.b.z"] == "unchanged"
    # f.a.x was unchanged, but its project runs: up schedules it to compare with the project's outputs.
    assert sorted(fake.ran()) == ["f.a", "f.a.x+behind", "f.a.y+behind"]


def test_preview_keeps_a_skipped_cluster_skipped_behind_a_running_project() -> None:
    fake = FakeExecutor()
    skip = Skip(clusters=frozenset({"f.a.x"}), recheck_behind_project=False)
    results = statuses(
        FleetGraph(fleet(TWO)).forward(WalkKind.PREVIEW, fake.visit(), skip).run(fake.scheduler())
    )
    assert results["f.a.x"] == "unchanged" and "f.a.x" not in " ".join(fake.ran())


def test_a_node_skipped_without_an_unchanged_result_is_a_programming_error() -> None:
    fake = FakeExecutor()
    visit = fake.visit()
    visit.unchanged = None
    with pytest.raises(ValueError, match=r"f\.a"):
        FleetGraph(fleet(TWO)).forward(WalkKind.UP, visit, Skip(projects=frozenset({"f.a"})))


def test_a_creation_job_runs_before_its_cluster_beside_the_projects_and_never_fails_the_walk() -> None:
    fake = FakeExecutor(slow={"f.a": 0.1})
    created: list[str] = []

    def create(plan: ClusterPlan) -> Callable[[], None] | None:
        if plan.stack == "f.b.z":
            return None  # its stack exists: nothing to create

        def work() -> None:
            created.append(plan.stack)
            if plan.stack == "f.a.y":
                raise RuntimeError("stack init failed")  # the cluster's own run meets it again

        return work

    visit = fake.visit()
    visit.before_cluster = create
    walk = FleetGraph(fleet(TWO)).forward(WalkKind.UP, visit)
    assert walk.nodes == ["f.a", "f.b", "f.a.x", "f.a.y", "f.b.z"]  # auxiliary jobs are not nodes
    started: list[str] = []
    results = walk.outcome(fake.scheduler(), started.append)
    assert sorted(created) == ["f.a.x", "f.a.y"]
    assert {k: r.status for k, r in results.results.items() if k in walk.nodes} == dict.fromkeys(
        walk.nodes, "done"
    )
    assert sorted(started) == sorted(walk.nodes)  # told of nodes only
    assert len(walk.run(fake.scheduler())) == 5


def test_fail_fast_skips_what_has_not_started_auxiliary_jobs_included() -> None:
    fake = FakeExecutor(fail={"f.a"}, slow={"f.a": 0.05})
    visit = fake.visit()
    visit.before_cluster = lambda plan: lambda: None
    walk = FleetGraph(fleet({"a": ["x"], "b": ["y", "z"]})).forward(WalkKind.UP, visit)
    results = statuses(walk.run(fake.scheduler(concurrency=1, fail_fast=True)))
    assert results["f.a"] == "failed"
    assert set(results) == {"f.a", "f.b", "f.a.x", "f.b.y", "f.b.z"}
    assert results["f.b.z"] in ("skipped", "blocked by f.a")


# -------------------------------------------------------------------------------- stage and shard


@pytest.mark.parametrize(
    ("share", "walk", "projects", "clusters"),
    [
        (Share(), WalkKind.UP, 2, 3),
        (Share(Stage.PROJECTS), WalkKind.UP, 2, 0),
        (Share(Stage.CLUSTERS), WalkKind.UP, 0, 3),
        (Share(Stage.CLUSTERS), WalkKind.PREVIEW, 0, 3),
        (Share(None, "1/2"), WalkKind.UP, 2, 3),  # single-flight through the stack's lock
        (Share(None, "1/2"), WalkKind.REFRESH, 0, 3),  # shared: refreshed once, unsharded
        (Share(None, "1/2"), WalkKind.DESTROY, 0, 3),  # another shard may still use them
        (Share(Stage.CLUSTERS, "1/2"), WalkKind.DESTROY, 0, 3),
        (Share(Stage.PROJECTS), WalkKind.DESTROY, 2, 0),
        (Share(), WalkKind.STATUS, 0, 3),
    ],
)
def test_the_share_decides_which_nodes_a_walk_visits(
    share: Share, walk: WalkKind, projects: int, clusters: int
) -> None:
    graph = FleetGraph(fleet(TWO), share)
    assert (len(graph.projects(walk)), len(graph.clusters(walk))) == (projects, clusters)
    assert share.keeps_project_stacks == (bool(share.shard) or share.stage is Stage.CLUSTERS)


def test_the_clusters_stage_runs_clusters_without_waiting_for_projects() -> None:
    fake = FakeExecutor()
    walk = FleetGraph(fleet(TWO), Share(Stage.CLUSTERS)).forward(WalkKind.UP, fake.visit())
    assert all(job.after == () for job in walk.jobs)
    walk.run(fake.scheduler())
    assert sorted(fake.ran()) == ["f.a.x", "f.a.y", "f.b.z"]  # not behind a project: none ran here


def test_a_stage_parses_and_the_projects_stage_is_never_sharded() -> None:
    assert parse_stage(None, "1/2") is None
    assert parse_stage("clusters", "1/2") is Stage.CLUSTERS
    with pytest.raises(UserInputError, match="expected one of projects, clusters"):
        parse_stage("nodes", None)
    with pytest.raises(UserInputError, match="cannot be combined with --shard"):
        parse_stage("projects", "1/2")


# ----------------------------------------------------------------------------------------- backward


def test_destroy_walks_backward_and_a_projects_phases_run_once_its_clusters_are_done() -> None:
    fake = FakeExecutor(fail={"f.a.x"}, slow={"f.b.z": 0.1})
    graph = FleetGraph(fleet(TWO))
    walk = graph.backward(fake.visit(), project_group="guarded", project_limit=1)
    results = statuses(walk.run(fake.scheduler()))
    assert walk.nodes[-2:] == [f"{PROJECT_PHASES}f.a", f"{PROJECT_PHASES}f.b"]
    assert fake.started("f.a") > max(fake.ended("f.a.x"), fake.ended("f.a.y"))  # the phases of a
    assert fake.started("f.b") > fake.ended("f.b.z")
    # A failed cluster does not block its project's job: its phases decide what the cluster keeps.
    assert results["f.a.x"] == "failed" and results["f.a"] == "done"
    # Never behind another project's clusters: a's phases ran while b's slow cluster was still running.
    assert fake.started("f.a") < fake.ended("f.b.z")


def test_the_guarded_phases_of_projects_run_one_at_a_time() -> None:
    fake = FakeExecutor(slow={"f.a": 0.05, "f.b": 0.05})
    plans = fleet({"a": [], "b": []})
    walk = FleetGraph(plans).backward(fake.visit(), project_group="guarded", project_limit=1)
    walk.run(fake.scheduler())
    assert fake.most_at_once == 1


def test_destroy_of_a_shard_or_the_clusters_stage_leaves_the_projects() -> None:
    fake = FakeExecutor()
    walk = FleetGraph(fleet(TWO), Share(Stage.CLUSTERS)).backward(fake.visit())
    walk.run(fake.scheduler())
    assert sorted(fake.ran()) == ["f.a.x", "f.a.y", "f.b.z"]


# --------------------------------------------------------------------------------------------- waves


def arrangement(
    fake: FakeExecutor, members: dict[int, list[str]], halt_at: int | None = None
) -> tuple[WaveArrangement[Result], list[int]]:
    barriers: list[int] = []

    def barrier(index: int) -> Callable[[], Result]:
        def decide() -> Result:  # as engine/rollout.py's: once a wave halted, every later barrier fails
            barriers.append(index)
            halted = halt_at is not None and index >= halt_at
            return Result(barrier_key(index), "failed" if halted else "passed")

        return decide

    return (
        WaveArrangement(
            members=members,
            tracked=lambda key, work: work,
            barrier=barrier,
            blocked=lambda key, inner: lambda culprit: Result(key, f"not started ({culprit})"),
            group_of={"f.a.y": "block-1", "f.b.z": "block-1"},
            limits={"block-1": 1},
        ),
        barriers,
    )


def test_waves_start_only_after_the_previous_wave_passed() -> None:
    fake = FakeExecutor(slow={"f.a.x": 0.1})
    waves, barriers = arrangement(fake, {1: ["f.a.x"], 2: ["f.a.y", "f.b.z"]})
    walk = FleetGraph(fleet(TWO), Share(Stage.CLUSTERS)).forward(WalkKind.UP, fake.visit()).with_waves(waves)
    results = statuses(walk.run(fake.scheduler()))
    assert fake.started("f.a.y") > fake.ended("f.a.x") and fake.started("f.b.z") > fake.ended("f.a.x")
    assert barriers == [1, 2] and set(results) == {"f.a.x", "f.a.y", "f.b.z"}  # barriers not reported
    assert fake.most_at_once == 1  # wave 2's members share one capacity block, limited to one at a time


def test_a_halted_wave_blocks_every_later_wave() -> None:
    fake = FakeExecutor()
    waves, barriers = arrangement(fake, {1: ["f.a.x"], 2: ["f.a.y"], 3: ["f.b.z"]}, halt_at=1)
    walk = FleetGraph(fleet(TWO), Share(Stage.CLUSTERS)).forward(WalkKind.UP, fake.visit()).with_waves(waves)
    results = statuses(walk.run(fake.scheduler()))
    assert fake.ran() == ["f.a.x"] and barriers == [1, 2, 3]  # each later barrier fails in turn
    assert results["f.a.y"] == f"not started ({barrier_key(1)})"
    assert results["f.b.z"].startswith("not started")


def test_a_rollouts_width_narrows_the_scheduler() -> None:
    fake = FakeExecutor(hold_until_running=2)
    waves, _ = arrangement(fake, {1: ["f.a.x", "f.a.y", "f.b.z"]})
    waves.group_of, waves.width = {}, 2
    walk = FleetGraph(fleet(TWO), Share(Stage.CLUSTERS)).forward(WalkKind.UP, fake.visit()).with_waves(waves)
    walk.run(fake.scheduler(concurrency=8))
    assert fake.most_at_once == 2


# ------------------------------------------------------------------------------------- plain work


def test_parallel_keeps_the_items_order_bounds_concurrency_and_reraises() -> None:
    fake = FakeExecutor(slow={str(i): 0.01 * (5 - i) for i in range(5)}, hold_until_running=2)
    assert parallel([str(i) for i in range(5)], lambda key: fake.work(key).key, 2) == [
        "0",
        "1",
        "2",
        "3",
        "4",
    ]
    assert fake.most_at_once == 2

    def boom(item: int) -> int:
        if item == 3:
            raise KeyError(item)
        return item

    with pytest.raises(KeyError):
        parallel([1, 2, 3, 4], boom, 2)


def test_status_visits_each_cluster_independently() -> None:
    fake = FakeExecutor()
    walk: Walk[Result] = FleetGraph(fleet(TWO)).each_cluster(WalkKind.STATUS, lambda c: fake.work(c.stack))
    assert [r.key for r in walk.run(fake.scheduler())] == ["f.a.x", "f.a.y", "f.b.z"]
    keyed = independent(WalkKind.REFRESH, [("s1", lambda: Result("s1")), ("s2", lambda: Result("s2"))])
    assert [r.key for r in keyed.run(fake.scheduler())] == ["s1", "s2"]
