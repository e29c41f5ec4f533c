"""One scheduler for every fleet operation: jobs over a small DAG on a bounded worker pool.

A fleet is a two-level graph, project → its clusters. `up`, `preview` and `refresh` walk it forward (a
project's clusters start as soon as that project's stack is done, never behind a barrier for every
project); `destroy` walks it backward (a project's phases wait for its clusters). The scheduler knows
nothing of Pulumi or stacks: a job is a key, the keys it waits for and the work that makes its result,
so its ordering, fail-fast and blocking rules are tested with plain functions
(tests/unit/engine/test_scheduler.py) while the engine's integration tests run it over real stacks.

Rules:
* a job starts when every job it waits for has finished and none of them failed; a job one of whose
  dependencies failed (or was itself blocked) does not run: its `blocked` result is made instead;
* at most `concurrency` jobs run at once, and at most `limits[group]` of the jobs of one group;
* ready jobs start in the order they were given;
* `fail_fast`: after the first failed result no new job starts, and those not started get `skipped`;
* an exception from a job's work is that job's failure (`failed`), never the scheduler's.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from npa_pulumi.errors import NpaError

log = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass(frozen=True)
class Job(Generic[R]):
    key: str
    work: Callable[[], R]
    after: tuple[str, ...] = ()  # keys of the jobs this one waits for (unknown keys are ignored)
    group: Hashable | None = None  # jobs of one group share `limits[group]`
    # The result when a job it waits for failed: given the failed key. None: the job runs anyway once
    # they finished (destroy's project phases decide themselves what a failed cluster blocks).
    blocked: Callable[[str], R] | None = None


@dataclass
class Outcome(Generic[R]):
    """The scheduler's record of one run: every job's result, in the order the jobs were given."""

    results: dict[str, R] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # keys in the order they started (tests read it)

    def ordered(self, jobs: Sequence[Job[R]]) -> list[R]:
        return [self.results[job.key] for job in jobs if job.key in self.results]


@dataclass
class Scheduler(Generic[R]):
    concurrency: int
    is_failure: Callable[[R], bool]
    failed: Callable[[str, str], R]  # (key, error) -> the result of a job whose work raised
    skipped: Callable[[str], R]  # key -> the result of a job fail-fast kept from starting
    fail_fast: bool = False
    limits: Mapping[Hashable, int] = field(default_factory=dict)

    def run(self, jobs: Sequence[Job[R]], started: Callable[[str], None] | None = None) -> Outcome[R]:
        outcome: Outcome[R] = Outcome()
        state = _Progress(jobs, self.limits)
        stop = False
        width = max(1, self.concurrency)
        with ThreadPoolExecutor(max_workers=width) as pool:
            running: dict[Future[R], int] = {}
            try:
                while state.waiting or running:
                    progressed = state.settle_blocked(outcome)
                    if not stop:
                        for index in state.take_ready(width - len(running)):
                            job = jobs[index]
                            outcome.order.append(job.key)
                            if started is not None:
                                started(job.key)
                            running[pool.submit(job.work)] = index
                    if not running:
                        if stop or not progressed:
                            break
                        continue
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        index = running.pop(future)
                        job = jobs[index]
                        result = self._result(job, future)
                        outcome.results[job.key] = result
                        state.finished(index, failed=self.is_failure(result))
                        if self.is_failure(result):
                            stop = stop or self.fail_fast
            except KeyboardInterrupt:
                state.waiting.clear()
                for future, index in running.items():
                    job = jobs[index]
                    try:
                        outcome.results[job.key] = future.result()
                    except Exception as err:
                        outcome.results[job.key] = self.failed(job.key, f"interrupted: {err}")
                raise
        for index in sorted(state.waiting):
            outcome.results[jobs[index].key] = self.skipped(jobs[index].key)
        return outcome

    def _result(self, job: Job[R], future: Future[R]) -> R:
        try:
            return future.result()
        except NpaError as err:
            return self.failed(job.key, str(err))
        except Exception as err:
            log.exception("job %s failed unexpectedly", job.key)
            return self.failed(job.key, f"{type(err).__name__}: {err}")


class _Progress(Generic[R]):
    """Which jobs wait, which are ready and which are blocked, kept up to date as jobs finish: each job
    counts the dependencies it still waits for, so a round costs what changed in it, not a scan of every
    waiting job (a fleet of 10,000 stacks is 10,000 jobs)."""

    def __init__(self, jobs: Sequence[Job[R]], limits: Mapping[Hashable, int]) -> None:
        self.jobs = jobs
        self.limits = limits
        self.waiting: set[int] = set(range(len(jobs)))  # neither started nor settled
        self.done: set[str] = set()
        self.bad: set[str] = set()  # failed or blocked: what blocks the jobs that wait for it
        self.by_key: dict[str, list[int]] = {}
        for index, job in enumerate(jobs):
            self.by_key.setdefault(job.key, []).append(index)
        self.dependents: dict[str, list[int]] = {}
        self.pending: list[int] = []  # per job: the known keys it waits for that are not done
        for index, job in enumerate(jobs):
            keys = {k for k in job.after if k in self.by_key}
            self.pending.append(len(keys))
            for key in keys:
                self.dependents.setdefault(key, []).append(index)
        # Ready jobs by the group whose limit they share (None: no limit), each a heap of job indices:
        # ready jobs start in the order given, a full group's jobs wait without holding back the others.
        self.ready: dict[Hashable, list[int]] = {}
        self.to_settle: list[int] = []  # jobs whose dependencies finished with one of them bad
        self.in_group: dict[Hashable, int] = {}
        for index in range(len(jobs)):
            if self.pending[index] == 0:
                self._ready(index)

    def _limited(self, index: int) -> Hashable | None:
        group = self.jobs[index].group
        return group if group is not None and group in self.limits else None

    def _ready(self, index: int) -> None:
        job = self.jobs[index]
        if job.blocked is not None and any(k in self.bad for k in job.after):
            heapq.heappush(self.to_settle, index)
        else:
            heapq.heappush(self.ready.setdefault(self._limited(index), []), index)

    def _mark_done(self, key: str, bad: bool) -> None:
        if bad:
            self.bad.add(key)
        if key in self.done:
            return
        self.done.add(key)
        for dependent in self.dependents.get(key, ()):
            self.pending[dependent] -= 1
            if self.pending[dependent] == 0 and dependent in self.waiting:
                self._ready(dependent)

    def finished(self, index: int, failed: bool) -> None:
        group = self._limited(index)
        if group is not None:
            self.in_group[group] -= 1
        self._mark_done(self.jobs[index].key, failed)

    def settle_blocked(self, outcome: Outcome[R]) -> bool:
        """Give every waiting job with a failed dependency its blocked result, once everything it waits
        for has finished; True if any was settled. A block travels down a chain of jobs."""
        settled = False
        while self.to_settle:
            index = heapq.heappop(self.to_settle)
            if index not in self.waiting:
                continue
            job = self.jobs[index]
            assert job.blocked is not None  # only such jobs are queued here
            culprit = next(k for k in job.after if k in self.bad)
            self.waiting.discard(index)
            outcome.results[job.key] = job.blocked(culprit)
            self._mark_done(job.key, bad=True)
            settled = True
        return settled

    def take_ready(self, room: int) -> list[int]:
        """Up to `room` ready jobs, in the order given, within their groups' limits; taken as started."""
        # The head of every group with room, smallest index first (indices are unique: no tie).
        heads: list[tuple[int, Hashable]] = [
            (queue[0], group) for group, queue in self.ready.items() if queue and self._has_room(group)
        ]
        heapq.heapify(heads)
        taken: list[int] = []
        while heads and len(taken) < room:
            index, group = heapq.heappop(heads)
            queue = self.ready[group]
            heapq.heappop(queue)
            self.waiting.discard(index)
            taken.append(index)
            if group is not None:
                self.in_group[group] = self.in_group.get(group, 0) + 1
            if queue and self._has_room(group):
                heapq.heappush(heads, (queue[0], group))
        return taken

    def _has_room(self, group: Hashable | None) -> bool:
        return group is None or self.in_group.get(group, 0) < self.limits[group]
