"""The one retry policy: bounded, jittered exponential backoff, and the loop that applies it.

What may be retried is the caller's decision, made twice: *which* errors are transient (`retry_on`: the
cloud port retries only `Unavailable`; everything else is the service's answer), and whether *this* call
is safe to repeat (`safe`: a read always; a mutation only when the service deduplicates it). This module
only knows how long to wait and when to stop: after `max_attempts`, or before a delay would pass a
`deadline`. Both cloud adapters use it (`npa_pulumi.cloud.retry`, `npa_pulumi.cloud.nebius.retry`), and so
does the bridge waiting out a stopping terraform's state lock. It imports only the standard library: the
local cloud's machine API, which soperator's stand-in recipe runs once per resource, must stay import-light.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)
log = logging.getLogger(__name__)

DEFAULT_ATTEMPTS = 5


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = DEFAULT_ATTEMPTS
    initial_backoff_s: float = 0.2
    multiplier: float = 2.0
    max_backoff_s: float = 3.0
    jitter: float = 0.2  # +/- this fraction of each delay

    def backoff(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """The delay after failed attempt number `attempt` (1-based)."""
        base = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (attempt - 1))
        spread = base * self.jitter
        return max(0.0, base - spread + 2 * spread * rand())

    def with_attempts_from_env(self, variable: str) -> RetryPolicy:
        """This policy with `max_attempts` from `$variable` when that holds an integer >= 1."""
        raw = os.environ.get(variable, "").strip()
        if raw.isdigit() and int(raw) >= 1:
            return replace(self, max_attempts=int(raw))
        return self


def call_with_retry(
    call: Callable[[], T],
    *,
    retry_on: type[E],
    what: str,
    safe: bool = True,
    policy: RetryPolicy | None = None,
    deadline: float | None = None,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    rand: Callable[[], float] = random.random,
    on_retry: Callable[[int, float, E], None] | None = None,
) -> T:
    """Run `call`; when it raises `retry_on` and `safe`, run it again after a backoff, at most
    `policy.max_attempts` times in all, and never sleeping past `deadline` (a `clock()` value). The last
    error is raised as it was. `on_retry(attempt, delay, error)` is told about each retry."""
    policy = policy or RetryPolicy()
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except retry_on as err:
            if not safe or attempt >= policy.max_attempts:
                raise
            delay = policy.backoff(attempt, rand)
            if deadline is not None and clock() + delay >= deadline:
                raise
            log.info(
                "%s failed (attempt %d/%d): %s; retrying in %.2fs",
                what,
                attempt,
                policy.max_attempts,
                err,
                delay,
            )
            if on_retry is not None:
                on_retry(attempt, delay, err)
            (sleep or time.sleep)(delay)
