"""Retrying `Unavailable` where it is safe, for callers outside the `nebius` adapter.

The `nebius` adapter has its own `Retrier` (settings from its profile, SDK retries switched off). This is
the same rule, dependency-free, for the `local` adapter and the local cloud's machine-facing API (which
the stand-in recipe's provisioners call once per resource, so it must stay import-light):

* a read (get, list, find) is always safe to repeat;
* a mutation is safe only when the service deduplicates it: a create that carries an idempotency key
  (a replay returns the object the first attempt made), or a delete whose caller treats "already gone"
  as success;
* only `Unavailable` is retried, with bounded, jittered exponential backoff; every other error is the
  service's answer (quota, permission, precondition, argument) and is raised at once.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from npa_pulumi.cloud.errors import Unavailable

T = TypeVar("T")
log = logging.getLogger(__name__)

ENV_ATTEMPTS = "NPA_CLOUD_RETRY_ATTEMPTS"
DEFAULT_ATTEMPTS = 5


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = DEFAULT_ATTEMPTS
    initial_backoff_s: float = 0.2
    multiplier: float = 2.0
    max_backoff_s: float = 3.0
    jitter: float = 0.2  # +/- this fraction of each delay

    @classmethod
    def from_env(cls) -> RetryPolicy:
        """`$NPA_CLOUD_RETRY_ATTEMPTS` (>= 1) overrides the number of attempts."""
        raw = os.environ.get(ENV_ATTEMPTS, "").strip()
        if raw.isdigit() and int(raw) >= 1:
            return cls(max_attempts=int(raw))
        return cls()

    def backoff(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """The delay after failed attempt number `attempt` (1-based)."""
        base = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (attempt - 1))
        spread = base * self.jitter
        return max(0.0, base - spread + 2 * spread * rand())


def call_with_retry(
    call: Callable[[], T],
    *,
    what: str,
    safe: bool,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] | None = None,
    on_retry: Callable[[int, float, Unavailable], None] | None = None,
) -> T:
    """Run `call`; when it raises `Unavailable` and `safe`, run it again after a backoff, at most
    `policy.max_attempts` times in all. `on_retry(attempt, delay, error)` is told about each retry."""
    policy = policy or RetryPolicy.from_env()
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except Unavailable as err:
            if not safe or attempt >= policy.max_attempts:
                raise
            delay = policy.backoff(attempt)
            log.info(
                "%s unavailable (attempt %d/%d): %s; retrying in %.2fs",
                what,
                attempt,
                policy.max_attempts,
                err.message,
                delay,
            )
            if on_retry is not None:
                on_retry(attempt, delay, err)
            (sleep or time.sleep)(delay)
