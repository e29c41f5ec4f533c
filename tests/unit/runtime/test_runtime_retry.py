"""The one retry policy (runtime.retry): which errors it retries is the caller's (`retry_on`, `safe`); it
decides only how long to wait and when to stop (attempts, deadline)."""

from __future__ import annotations

import pytest

from npa_pulumi.runtime.retry import DEFAULT_ATTEMPTS, RetryPolicy, call_with_retry


class Transient(Exception):
    pass


class Flaky:
    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures, self.calls = failures, 0
        self.error = error or Transient("later")

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"


def test_backoff_is_exponential_capped_and_jittered() -> None:
    policy = RetryPolicy(initial_backoff_s=0.5, multiplier=2.0, max_backoff_s=3.0, jitter=0.0)
    assert [policy.backoff(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    jittered = RetryPolicy(initial_backoff_s=1.0, jitter=0.2)
    assert jittered.backoff(1, rand=lambda: 0.0) == pytest.approx(0.8)
    assert jittered.backoff(1, rand=lambda: 1.0) == pytest.approx(1.2)


def test_only_the_named_errors_are_retried() -> None:
    sleeps: list[float] = []
    flaky = Flaky(2)
    assert call_with_retry(flaky, retry_on=Transient, what="x", sleep=sleeps.append, rand=lambda: 0.5) == "ok"
    assert flaky.calls == 3 and sleeps == pytest.approx([0.2, 0.4])
    other = Flaky(1, ValueError("an answer"))
    with pytest.raises(ValueError):
        call_with_retry(other, retry_on=Transient, what="x", sleep=sleeps.append)
    assert other.calls == 1


def test_unsafe_calls_are_tried_once() -> None:
    flaky = Flaky(1)
    with pytest.raises(Transient):
        call_with_retry(flaky, retry_on=Transient, what="x", safe=False, sleep=lambda _: None)
    assert flaky.calls == 1


def test_attempts_are_bounded_and_each_retry_is_reported() -> None:
    flaky, told = Flaky(100), []
    with pytest.raises(Transient):
        call_with_retry(
            flaky,
            retry_on=Transient,
            what="x",
            policy=RetryPolicy(max_attempts=3),
            sleep=lambda _: None,
            on_retry=lambda attempt, delay, err: told.append((attempt, str(err))),
        )
    assert flaky.calls == 3 and told == [(1, "later"), (2, "later")]


def test_no_sleep_passes_the_deadline() -> None:
    flaky, sleeps = Flaky(100), list[float]()
    with pytest.raises(Transient):
        call_with_retry(
            flaky,
            retry_on=Transient,
            what="x",
            policy=RetryPolicy(initial_backoff_s=1.0, jitter=0.0),
            deadline=101.5,
            clock=lambda: 100.0,
            sleep=sleeps.append,
        )
    assert flaky.calls == 2 and sleeps == [1.0]  # a second delay (2 s) would pass the deadline


def test_attempts_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_ATTEMPTS", "2")
    assert RetryPolicy().with_attempts_from_env("SOME_ATTEMPTS").max_attempts == 2
    for bad in ("zero", "0", ""):
        monkeypatch.setenv("SOME_ATTEMPTS", bad)
        assert RetryPolicy().with_attempts_from_env("SOME_ATTEMPTS").max_attempts == DEFAULT_ATTEMPTS


def test_both_cloud_adapters_use_this_policy() -> None:
    from npa_pulumi.cloud.nebius.retry import Retrier
    from npa_pulumi.cloud.nebius.settings import RetrySettings
    from npa_pulumi.cloud.retry import default_policy

    assert isinstance(default_policy(), RetryPolicy)
    retrier = Retrier(RetrySettings(max_attempts=7, initial_backoff_s=0.5, max_backoff_s=8.0))
    assert retrier.policy == RetryPolicy(max_attempts=7, initial_backoff_s=0.5, max_backoff_s=8.0)
