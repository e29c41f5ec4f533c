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
        known = {job.key for job in jobs}
        waiting = list(jobs)
        done: set[str] = set()
        bad: set[str] = set()  # failed or blocked: what blocks the jobs that wait for it
        stop = False
        width = max(1, self.concurrency)
        with ThreadPoolExecutor(max_workers=width) as pool:
            running: dict[Future[R], Job[R]] = {}
            try:
                while waiting or running:
                    progressed = self._settle_blocked(waiting, known, done, bad, outcome)
                    if not stop:
                        for job in self._ready(waiting, known, done, running):
                            if len(running) >= width:
                                break
                            waiting.remove(job)
                            outcome.order.append(job.key)
                            if started is not None:
                                started(job.key)
                            running[pool.submit(job.work)] = job
                    if not running:
                        if stop or not progressed:
                            break
                        continue
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        job = running.pop(future)
                        result = self._result(job, future)
                        outcome.results[job.key] = result
                        done.add(job.key)
                        if self.is_failure(result):
                            bad.add(job.key)
                            stop = stop or self.fail_fast
            except KeyboardInterrupt:
                waiting.clear()
                for future, job in running.items():
                    try:
                        outcome.results[job.key] = future.result()
                    except Exception as err:
                        outcome.results[job.key] = self.failed(job.key, f"interrupted: {err}")
                raise
        for job in waiting:
            outcome.results[job.key] = self.skipped(job.key)
        return outcome

    def _settle_blocked(
        self, waiting: list[Job[R]], known: set[str], done: set[str], bad: set[str], outcome: Outcome[R]
    ) -> bool:
        """Give every waiting job with a failed dependency its blocked result; True if any was settled.
        Repeats until stable, so a block travels down a chain of jobs."""
        settled = False
        changed = True
        while changed:
            changed = False
            for job in list(waiting):
                culprit = next((k for k in job.after if k in bad), None)
                if culprit is None or job.blocked is None:
                    continue
                if any(k in known and k not in done for k in job.after if k not in bad):
                    continue  # report once everything it waits for has finished
                waiting.remove(job)
                outcome.results[job.key] = job.blocked(culprit)
                done.add(job.key)
                bad.add(job.key)
                settled = changed = True
        return settled

    def _ready(
        self, waiting: list[Job[R]], known: set[str], done: set[str], running: dict[Future[R], Job[R]]
    ) -> list[Job[R]]:
        in_group: dict[Hashable, int] = {}
        for job in running.values():
            if job.group is not None:
                in_group[job.group] = in_group.get(job.group, 0) + 1
        ready = []
        for job in waiting:
            if any(k in known and k not in done for k in job.after):
                continue
            if job.group is not None and job.group in self.limits:
                if in_group.get(job.group, 0) >= self.limits[job.group]:
                    continue
                in_group[job.group] = in_group.get(job.group, 0) + 1
            ready.append(job)
        return ready

    def _result(self, job: Job[R], future: Future[R]) -> R:
        try:
            return future.result()
        except NpaError as err:
            return self.failed(job.key, str(err))
        except Exception as err:
            log.exception("job %s failed unexpectedly", job.key)
            return self.failed(job.key, f"{type(err).__name__}: {err}")
