"""Retrying transient failures without ever duplicating a mutation.

* Reads (gets, lists, operation polls) retry `Unavailable` with bounded exponential backoff.
* A mutation is retried only when it carries an idempotency key the server honours: the adapter
  sends the *same* `X-Idempotency-Key` on every attempt, so a create whose response was lost cannot
  create twice. With `idempotent_mutations` off, a mutation's first failure is final.
* Nothing else is retried: quota, permission, precondition and argument errors are answers.

The SDK's own per-request retries are switched off by the adapter (`retries=0`): by default the SDK
retries UNAVAILABLE *and* RESOURCE_EXHAUSTED on every call, mutations included, which would hide quota
refusals behind delays and take the retry decision out of this module.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from ..errors import CloudRequest, Unavailable
from .settings import RetrySettings

T = TypeVar("T")
log = logging.getLogger(__name__)


class Retrier:
    def __init__(
        self,
        settings: RetrySettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        self._clock = clock
        self._rand = rand

    def backoff(self, attempt: int) -> float:
        """Delay after failed attempt number `attempt` (1-based), jittered, capped."""
        s = self.settings
        base = min(s.max_backoff_s, s.initial_backoff_s * (s.multiplier ** (attempt - 1)))
        spread = base * s.jitter
        return max(0.0, base - spread + 2 * spread * self._rand())

    def read(self, call: Callable[[], T], request: CloudRequest, *, deadline: float | None = None) -> T:
        return self._run(call, request, retry=True, deadline=deadline)

    def mutation(self, call: Callable[[], T], request: CloudRequest) -> T:
        return self._run(call, request, retry=self.settings.idempotent_mutations, deadline=None)

    def _run(self, call: Callable[[], T], request: CloudRequest, *, retry: bool, deadline: float | None) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                return call()
            except Unavailable as exc:
                if not retry or attempt >= self.settings.max_attempts:
                    raise
                delay = self.backoff(attempt)
                if deadline is not None and self._clock() + delay >= deadline:
                    raise
                log.info(
                    "%s unavailable (attempt %d/%d): %s; retrying in %.2fs",
                    request.method,
                    attempt,
                    self.settings.max_attempts,
                    exc.message,
                    delay,
                )
                self._sleep(delay)
