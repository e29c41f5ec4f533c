"""The fleet graph: one value per command over which every operation walks, on the one scheduler.

A fleet is a two-level graph, project → its clusters. `FleetGraph` holds the selection's nodes (built once
from the plans; the targets are already the shard's share, sdk/requests.py) and applies the run's share —
its stage (`--stage projects|clusters`) and shard — once, here, as the set of nodes each walk visits:

| walk | direction | project nodes (never with `--stage clusters`) | cluster nodes |
|---|---|---|---|
| up, preview, adopt | forward | all | unless `--stage projects` |
| refresh | forward | not with a shard (shared: refreshed once, unsharded) | unless `--stage projects` |
| status | none | never (a cluster's status reads its own stack) | unless `--stage projects` |
| destroy | backward | not with a shard (another shard may still use them) | unless `--stage projects` |

Forward, a cluster's job waits for its own project's job only (never a barrier behind every project) and is
`blocked` when that job failed; backward, a project's job waits for its clusters' jobs and runs whatever
they did (its phases decide what a remaining cluster keeps). A node an operation proved unchanged is not
scheduled: its result is made at once, except (forward, `recheck_behind_project`) a cluster whose project
runs in the same walk, which is scheduled so it can be compared with its project's new outputs. A rollout
adds wave barriers to a forward walk (`Walk.with_waves`). What a node's job does is the operation's
`Visit`; the graph knows nothing of Pulumi, so its ordering, skipping, stage, shard and wave rules are unit
tests with a recording visit (tests/unit/engine/test_graph.py), the fake executor.

This module is the one place in the engine that builds scheduler jobs (`parallel` for work with no edges).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from npa_pulumi.engine.plans import FleetPlans
from npa_pulumi.engine.programs import ClusterPlan, ProjectPlan
from npa_pulumi.engine.scheduler import Job, Outcome, Scheduler
from npa_pulumi.engine.share import Share, Stage, WalkKind, parse_stage

PROJECT_PHASES = "project:"  # a destroy's project job is keyed `project:<stack>` (its phases, not a stack)
WAVE_BARRIER = "rollout-wave:"  # a wave's barrier job is keyed `rollout-wave:<index>`

__all__ = [
    "PROJECT_PHASES",
    "WAVE_BARRIER",
    "FleetGraph",
    "Share",
    "Skip",
    "Stage",
    "Visit",
    "Walk",
    "WalkKind",
    "WaveArrangement",
    "barrier_key",
    "independent",
    "is_barrier",
    "parallel",
    "parse_stage",
]

log = logging.getLogger(__name__)

R = TypeVar("R")
T = TypeVar("T")
U = TypeVar("U")


@dataclass
class Visit(Generic[R]):
    """What an operation does at each node its walk reaches: the executor the graph runs.

    `cluster` is given the plan and whether its project's job ran before it in this walk."""

    project: Callable[[ProjectPlan], R]
    cluster: Callable[[ClusterPlan, bool], R]
    blocked: Callable[[ClusterPlan, str], R] | None = None  # a cluster whose project's job failed
    unchanged: Callable[[ProjectPlan | ClusterPlan], R] | None = None  # a node proved unchanged
    # Jobs that run before a cluster's own job (for example creating its empty stack beside the project's
    # update): never a failure, never in the results.
    before_cluster: Callable[[ClusterPlan], Callable[[], None] | None] | None = None


@dataclass(frozen=True)
class Skip:
    """Nodes an operation proved unchanged (by stack name)."""

    projects: frozenset[str] = frozenset()
    clusters: frozenset[str] = frozenset()
    # Forward: a cluster whose project runs in the walk is scheduled anyway (up compares it with the
    # project's new outputs); False keeps it skipped (a preview changes no project).
    recheck_behind_project: bool = True


@dataclass
class Walk(Generic[R]):
    """One operation's jobs over the graph, with the results of the nodes it did not schedule."""

    kind: WalkKind
    jobs: list[Job[R]]
    settled: list[R]  # results made without scheduling (unchanged nodes), in graph order
    nodes: list[str]  # the scheduled nodes' keys, in graph order (auxiliary jobs excluded)
    limits: dict[Hashable, int] = field(default_factory=dict)
    width: int | None = None  # a narrower scheduler (a rollout's max_in_flight)

    def with_waves(self, waves: WaveArrangement[R]) -> Walk[R]:
        """The same walk with a rollout's waves: each cluster job of wave N waits for wave N-1's barrier,
        a job that waits for every cluster of its wave and decides whether the rollout halts; a halted
        barrier fails, so every later wave is blocked. Clusters of one capacity block share a group."""
        jobs: list[Job[R]] = []
        for job in self.jobs:
            wave = waves.wave_of.get(job.key)
            if wave is None:
                jobs.append(job)
                continue
            after = job.after + ((barrier_key(wave - 1),) if wave > 1 else ())
            jobs.append(
                Job(
                    job.key,
                    waves.tracked(job.key, job.work),
                    after=after,
                    group=waves.group_of.get(job.key),
                    blocked=waves.blocked(job.key, job.blocked),
                )
            )
        for index, members in sorted(waves.members.items()):
            waits = tuple(members) + ((barrier_key(index - 1),) if index > 1 else ())
            jobs.append(Job(barrier_key(index), waves.barrier(index), after=waits))
        return Walk(
            self.kind,
            jobs,
            self.settled,
            self.nodes,
            {**self.limits, **waves.limits},
            waves.width or self.width,
        )

    def run(self, scheduler: Scheduler[R], started: Callable[[str], None] | None = None) -> list[R]:
        """The settled results, then every scheduled node's result in graph order."""
        outcome = self.outcome(scheduler, started)
        return [*self.settled, *(outcome.results[key] for key in self.nodes if key in outcome.results)]

    def outcome(self, scheduler: Scheduler[R], started: Callable[[str], None] | None = None) -> Outcome[R]:
        """Run the jobs on `scheduler`'s rules, with this walk's limits and width; auxiliary jobs never
        count as failures and are never reported (`started` is told only of nodes)."""
        auxiliary = (
            {job.key for job in self.jobs}
            - set(self.nodes)
            - {job.key for job in self.jobs if is_barrier(job.key)}
        )
        aux_result = cast(R, _AUXILIARY)

        def is_failure(result: R) -> bool:
            return result is not _AUXILIARY and scheduler.is_failure(result)

        def failed(key: str, error: str) -> R:
            return aux_result if key in auxiliary else scheduler.failed(key, error)

        def skipped(key: str) -> R:
            return aux_result if key in auxiliary else scheduler.skipped(key)

        def told(key: str) -> None:
            if started is not None and key not in auxiliary:
                started(key)

        return Scheduler(
            concurrency=self.width or scheduler.concurrency,
            is_failure=is_failure,
            failed=failed,
            skipped=skipped,
            fail_fast=scheduler.fail_fast,
            limits={**scheduler.limits, **self.limits},
        ).run(self.jobs, told)


@dataclass
class WaveArrangement(Generic[R]):
    """A rollout's waves as the graph needs them (engine/rollout.py builds it)."""

    members: dict[int, list[str]]  # wave index -> its cluster stacks
    tracked: Callable[[str, Callable[[], R]], Callable[[], R]]  # a cluster's work, recording its outcome
    barrier: Callable[[int], Callable[[], R]]  # wave index -> the barrier's decision
    blocked: Callable[[str, Callable[[str], R] | None], Callable[[str], R]]
    group_of: dict[str, Hashable] = field(default_factory=dict)  # stack -> its capacity block group
    limits: dict[Hashable, int] = field(default_factory=dict)
    width: int | None = None

    @property
    def wave_of(self) -> dict[str, int]:
        return {stack: index for index, stacks in self.members.items() for stack in stacks}


def barrier_key(index: int) -> str:
    return f"{WAVE_BARRIER}{index}"


def is_barrier(key: str) -> bool:
    return key.startswith(WAVE_BARRIER)


def _creation_key(stack: str) -> str:
    return f"create:{stack}"


class FleetGraph:
    """The selection's project and cluster nodes, with the run's share applied once."""

    def __init__(self, plans: FleetPlans, share: Share | None = None) -> None:
        self.share = share or Share()
        self.all_projects: tuple[ProjectPlan, ...] = tuple(plans.projects)
        self.all_clusters: tuple[ClusterPlan, ...] = tuple(plans.clusters)

    def projects(self, walk: WalkKind) -> list[ProjectPlan]:
        """The project nodes `walk` visits."""
        return list(self.all_projects) if self.share.visits_projects(walk) else []

    def clusters(self, walk: WalkKind) -> list[ClusterPlan]:
        """The cluster nodes `walk` visits."""
        return list(self.all_clusters) if self.share.visits_clusters(walk) else []

    def clusters_of(self, project: ProjectPlan, walk: WalkKind) -> list[ClusterPlan]:
        return [c for c in self.clusters(walk) if c.project_stack == project.stack]

    # ---------------------------------------------------------------------------------- walks

    def forward(
        self,
        walk: WalkKind,
        visit: Visit[R],
        skip: Skip | None = None,
        *,
        projects: Iterable[ProjectPlan] | None = None,
        clusters: Iterable[ClusterPlan] | None = None,
    ) -> Walk[R]:
        """Project jobs, then each cluster's job after its own project's (when that runs in this walk).
        `projects` / `clusters` narrow the walk to some of its nodes (adopt takes over only some)."""
        skip = skip or Skip()
        project_nodes = list(projects) if projects is not None else self.projects(walk)
        cluster_nodes = list(clusters) if clusters is not None else self.clusters(walk)
        settled: list[R] = []
        jobs: list[Job[R]] = []
        nodes: list[str] = []
        running: set[str] = set()
        for project in project_nodes:
            if project.stack in skip.projects:
                settled.append(_unchanged(visit, project))
                continue
            running.add(project.stack)
            jobs.append(Job(project.stack, _bind(visit.project, project)))
            nodes.append(project.stack)
        scheduled: list[ClusterPlan] = []
        for cluster in cluster_nodes:
            behind = cluster.project_stack in running
            if cluster.stack in skip.clusters and not (behind and skip.recheck_behind_project):
                settled.append(_unchanged(visit, cluster))
            else:
                scheduled.append(cluster)
        before: set[str] = set()
        if visit.before_cluster is not None and running:
            # Only beside running project jobs: alone, a cluster's own run does it in its path anyway.
            for cluster in scheduled:
                work = visit.before_cluster(cluster)
                if work is not None:
                    jobs.append(Job(_creation_key(cluster.stack), _auxiliary(work)))
                    before.add(cluster.stack)
        for cluster in scheduled:
            behind = cluster.project_stack in running
            after: tuple[str, ...] = (cluster.project_stack,) if behind else ()
            if cluster.stack in before:
                after += (_creation_key(cluster.stack),)
            jobs.append(
                Job(
                    cluster.stack,
                    _bind_cluster(visit.cluster, cluster, behind),
                    after=after,
                    blocked=_bind_blocked(visit.blocked, cluster) if visit.blocked else None,
                )
            )
            nodes.append(cluster.stack)
        return Walk(walk, jobs, settled, nodes)

    def backward(
        self,
        visit: Visit[R],
        *,
        project_group: Hashable | None = None,
        project_limit: int = 1,
    ) -> Walk[R]:
        """Cluster jobs, then each project's job (keyed `project:<stack>`) once every cluster job of that
        project has finished, whatever they did; the project jobs share `project_group`, at most
        `project_limit` at once (a destroy's guarded phases run one at a time)."""
        walk = WalkKind.DESTROY
        clusters = self.clusters(walk)
        jobs: list[Job[R]] = [Job(c.stack, _bind_cluster(visit.cluster, c, False)) for c in clusters]
        nodes = [c.stack for c in clusters]
        for project in self.projects(walk):
            waits = tuple(c.stack for c in clusters if c.project_stack == project.stack)
            key = f"{PROJECT_PHASES}{project.stack}"
            jobs.append(Job(key, _bind(visit.project, project), after=waits, group=project_group))
            nodes.append(key)
        limits: dict[Hashable, int] = {project_group: project_limit} if project_group is not None else {}
        return Walk(walk, jobs, [], nodes, limits)

    def each_cluster(self, walk: WalkKind, work: Callable[[ClusterPlan], R]) -> Walk[R]:
        """Independent work on every cluster node `walk` visits (status)."""
        clusters = self.clusters(walk)
        return Walk(walk, [Job(c.stack, _bind(work, c)) for c in clusters], [], [c.stack for c in clusters])


def independent(walk: WalkKind, keyed: Sequence[tuple[str, Callable[[], R]]]) -> Walk[R]:
    """A walk of independent jobs (no edges), each keyed as given: refreshing a list of stacks."""
    return Walk(walk, [Job(key, work) for key, work in keyed], [], [key for key, _ in keyed])


def parallel(items: Sequence[T], work: Callable[[T], U], concurrency: int) -> list[U]:
    """`work` over `items` on the one scheduler, at most `concurrency` at once, results in the items'
    order; an exception is re-raised (the first, in the items' order), as a thread pool's map does."""
    failures: dict[int, BaseException] = {}

    def job(index: int) -> Callable[[], U | None]:
        def run() -> U | None:
            try:
                return work(items[index])
            except Exception as err:  # re-raised below, in the caller's thread
                failures[index] = err
                return None

        return run

    jobs = [Job(str(i), job(i)) for i in range(len(items))]
    scheduler: Scheduler[U | None] = Scheduler(
        concurrency=max(1, concurrency),
        is_failure=lambda _result: False,
        failed=lambda _key, _error: None,
        skipped=lambda _key: None,
    )
    outcome = scheduler.run(jobs)
    if failures:
        raise failures[min(failures)]
    return [outcome.results[str(i)] for i in range(len(items))]  # type: ignore[misc]


def _unchanged(visit: Visit[R], node: ProjectPlan | ClusterPlan) -> R:
    if visit.unchanged is None:
        raise ValueError(f"{node.stack}: skipped as unchanged, but the walk makes no unchanged result")
    return visit.unchanged(node)


def _bind(work: Callable[[U], R], node: U) -> Callable[[], R]:
    return lambda: work(node)


def _bind_cluster(work: Callable[[ClusterPlan, bool], R], node: ClusterPlan, behind: bool) -> Callable[[], R]:
    return lambda: work(node, behind)


def _bind_blocked(blocked: Callable[[ClusterPlan, str], R], node: ClusterPlan) -> Callable[[str], R]:
    return lambda culprit: blocked(node, culprit)


_AUXILIARY = object()  # the result of an auxiliary job


def _auxiliary(work: Callable[[], None]) -> Callable[[], Any]:
    """An auxiliary job: its work's failure is the node's own job's to meet (that job runs anyway and
    meets it again), so it never fails the walk; its result is never reported."""

    def run() -> object:
        try:
            work()
        except Exception:  # the cluster's own run meets the same problem and reports it
            log.debug("auxiliary job failed", exc_info=True)
        return _AUXILIARY

    return run
