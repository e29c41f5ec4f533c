"""Retrying transient failures without ever duplicating a mutation.

* Reads (gets, lists, operation polls) retry `Unavailable` with bounded exponential backoff.
* A mutation is retried only when it carries an idempotency key the server honours: the adapter
  sends the *same* `X-Idempotency-Key` on every attempt, so a create whose response was lost cannot
  create twice. With `idempotent_mutations` off, a mutation's first failure is final.
* Nothing else is retried: quota, permission, precondition and argument errors are answers.

The policy and the loop are the cloud port's (`npa_pulumi.cloud.retry`, `npa_pulumi.runtime.retry`);
this adapter only supplies its settings and an operation's deadline.

The SDK's own per-request retries are switched off by the adapter (`retries=0`): by default the SDK
retries UNAVAILABLE *and* RESOURCE_EXHAUSTED on every call, mutations included, which would hide quota
refusals behind delays and take the retry decision out of this module.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from ..errors import CloudRequest
from ..retry import call_with_retry
from .settings import RetrySettings

T = TypeVar("T")


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
        self.policy = settings.policy()
        self._sleep = sleep
        self._clock = clock
        self._rand = rand

    def backoff(self, attempt: int) -> float:
        """Delay after failed attempt number `attempt` (1-based), jittered, capped."""
        return self.policy.backoff(attempt, self._rand)

    def read(self, call: Callable[[], T], request: CloudRequest, *, deadline: float | None = None) -> T:
        return self._run(call, request, retry=True, deadline=deadline)

    def mutation(self, call: Callable[[], T], request: CloudRequest) -> T:
        return self._run(call, request, retry=self.settings.idempotent_mutations, deadline=None)

    def _run(self, call: Callable[[], T], request: CloudRequest, *, retry: bool, deadline: float | None) -> T:
        return call_with_retry(
            call,
            what=request.method,
            safe=retry,
            policy=self.policy,
            deadline=deadline,
            sleep=self._sleep,
            clock=self._clock,
            rand=self._rand,
        )
