"""What the cloud port retries: `Unavailable`, where a repeat is safe (the policy is `runtime.retry`'s).

* a read (get, list, find) is always safe to repeat;
* a mutation is safe only when the service deduplicates it: a create that carries an idempotency key
  (a replay returns the object the first attempt made), or a delete whose caller treats "already gone"
  as success;
* only `Unavailable` is retried; every other error is the service's answer (quota, permission,
  precondition, argument) and is raised at once.

The `local` adapter and the local cloud's machine API call `call_with_retry` with the default policy
(`$NPA_CLOUD_RETRY_ATTEMPTS` sets its attempts); the `nebius` adapter passes the policy of its settings
and a deadline.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from npa_pulumi.cloud.errors import Unavailable
from npa_pulumi.runtime import retry
from npa_pulumi.runtime.retry import DEFAULT_ATTEMPTS, RetryPolicy

T = TypeVar("T")

ENV_ATTEMPTS = "NPA_CLOUD_RETRY_ATTEMPTS"

__all__ = ["DEFAULT_ATTEMPTS", "ENV_ATTEMPTS", "RetryPolicy", "call_with_retry", "default_policy"]


def default_policy() -> RetryPolicy:
    return RetryPolicy().with_attempts_from_env(ENV_ATTEMPTS)


def call_with_retry(
    call: Callable[[], T],
    *,
    what: str,
    safe: bool,
    policy: RetryPolicy | None = None,
    deadline: float | None = None,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    rand: Callable[[], float] = random.random,
    on_retry: Callable[[int, float, Unavailable], None] | None = None,
) -> T:
    """Run `call`, retrying `Unavailable` when `safe` (see the module docstring)."""
    return retry.call_with_retry(
        call,
        retry_on=Unavailable,
        what=what,
        safe=safe,
        policy=policy or default_policy(),
        deadline=deadline,
        sleep=sleep,
        clock=clock,
        rand=rand,
        on_retry=on_retry,
    )
