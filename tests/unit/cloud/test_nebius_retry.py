"""The `nebius` adapter's retry policy: bounded backoff for reads, no blind retries of mutations."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from npa_pulumi.cloud.errors import CloudRequest, QuotaExceeded, Unavailable
from npa_pulumi.cloud.nebius.retry import Retrier
from npa_pulumi.cloud.nebius.settings import RetrySettings

REQ = CloudRequest("svc.Method", {"id": "x"})


def flaky(failures: int, error: Exception | None = None) -> tuple[Callable[[], str], list[int]]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= failures:
            raise error or Unavailable("down", REQ)
        return "ok"

    return call, calls


def retrier(sleeps: list[float], **kw: object) -> Retrier:
    settings = RetrySettings(**{"jitter": 0.0, **kw})
    return Retrier(settings, sleep=sleeps.append, rand=lambda: 0.5)


def test_backoff_grows_exponentially_and_is_capped() -> None:
    r = retrier([], initial_backoff_s=0.5, multiplier=2.0, max_backoff_s=3.0)
    assert [r.backoff(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_jitter_stays_within_its_fraction() -> None:
    low = Retrier(RetrySettings(initial_backoff_s=1.0, jitter=0.2), rand=lambda: 0.0)
    high = Retrier(RetrySettings(initial_backoff_s=1.0, jitter=0.2), rand=lambda: 1.0)
    assert low.backoff(1) == pytest.approx(0.8)
    assert high.backoff(1) == pytest.approx(1.2)


def test_reads_retry_unavailable_until_success() -> None:
    sleeps: list[float] = []
    call, calls = flaky(2)
    assert retrier(sleeps, initial_backoff_s=0.1).read(call, REQ) == "ok"
    assert (len(calls), sleeps) == (3, [0.1, 0.2])


def test_reads_give_up_after_max_attempts() -> None:
    sleeps: list[float] = []
    call, calls = flaky(10)
    with pytest.raises(Unavailable):
        retrier(sleeps, max_attempts=3).read(call, REQ)
    assert (len(calls), len(sleeps)) == (3, 2)


def test_reads_stop_before_a_deadline() -> None:
    sleeps: list[float] = []
    call, calls = flaky(10)
    r = Retrier(RetrySettings(initial_backoff_s=1.0, jitter=0.0), sleep=sleeps.append, clock=lambda: 100.0)
    with pytest.raises(Unavailable):
        r.read(call, REQ, deadline=100.5)
    assert (len(calls), sleeps) == (1, [])


def test_other_errors_are_never_retried() -> None:
    call, calls = flaky(1, QuotaExceeded("no", REQ))
    with pytest.raises(QuotaExceeded):
        retrier([]).read(call, REQ)
    assert len(calls) == 1


def test_mutations_retry_only_when_keys_are_honoured() -> None:
    call, calls = flaky(1)
    assert retrier([]).mutation(call, REQ) == "ok"
    assert len(calls) == 2
    call, calls = flaky(1)
    with pytest.raises(Unavailable):
        retrier([], idempotent_mutations=False).mutation(call, REQ)
    assert len(calls) == 1
