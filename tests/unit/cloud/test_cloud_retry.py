"""The cloud port's retry rule (npa_pulumi.cloud.retry, on runtime.retry's policy) and where the local cloud
applies it: reads and keyed creates are retried on `unavailable` with growing backoff; unkeyed mutations and
real answers are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_pulumi.cloud.errors import PermissionDenied, QuotaExceeded, Unavailable
from npa_pulumi.cloud.retry import (
    DEFAULT_ATTEMPTS,
    ENV_ATTEMPTS,
    RetryPolicy,
    call_with_retry,
    default_policy,
)
from npa_pulumi.simulator import LocalCloud
from npa_pulumi.simulator.api import call as api_call

TENANT = "tenant-local"
PROJECT = "project-existing1"


class Flaky:
    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.calls = 0
        self.error = error or Unavailable("try later")

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"


def test_backoff_grows_exponentially_within_its_cap_and_jitter() -> None:
    policy = RetryPolicy(initial_backoff_s=0.2, multiplier=2.0, max_backoff_s=1.0, jitter=0.2)
    lows = [policy.backoff(n, rand=lambda: 0.0) for n in range(1, 6)]
    highs = [policy.backoff(n, rand=lambda: 1.0) for n in range(1, 6)]
    assert lows == pytest.approx([0.16, 0.32, 0.64, 0.8, 0.8])
    assert highs == pytest.approx([0.24, 0.48, 0.96, 1.2, 1.2])


def test_a_safe_call_is_retried_until_it_succeeds_with_growing_delays() -> None:
    flaky, delays = Flaky(3), list[float]()
    result = call_with_retry(flaky, what="get", safe=True, policy=RetryPolicy(jitter=0), sleep=delays.append)
    assert result == "ok" and flaky.calls == 4
    assert delays == pytest.approx([0.2, 0.4, 0.8])


def test_retries_are_bounded_and_the_last_error_is_raised() -> None:
    flaky, delays = Flaky(100), list[float]()
    with pytest.raises(Unavailable):
        call_with_retry(flaky, what="get", safe=True, sleep=delays.append)
    assert flaky.calls == DEFAULT_ATTEMPTS and len(delays) == DEFAULT_ATTEMPTS - 1


@pytest.mark.parametrize("error", [QuotaExceeded("no quota"), PermissionDenied("no")])
def test_answers_are_never_retried(error: Exception) -> None:
    flaky = Flaky(1, error)
    with pytest.raises(type(error)):
        call_with_retry(flaky, what="create", safe=True, sleep=lambda _: None)
    assert flaky.calls == 1


def test_an_unsafe_mutation_is_not_retried() -> None:
    flaky = Flaky(1)
    with pytest.raises(Unavailable):
        call_with_retry(flaky, what="create", safe=False, sleep=lambda _: None)
    assert flaky.calls == 1


def test_attempts_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_ATTEMPTS, "2")
    assert default_policy().max_attempts == 2
    monkeypatch.setenv(ENV_ATTEMPTS, "zero")
    assert default_policy().max_attempts == DEFAULT_ATTEMPTS


@pytest.fixture
def cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalCloud:
    # no real backoff in unit tests
    monkeypatch.setattr("npa_pulumi.runtime.retry.time.sleep", lambda _: None)
    return LocalCloud(tmp_path / "cloud")


def test_local_adapter_reads_are_retried(cloud: LocalCloud) -> None:
    cloud.simulator.add_fault("get_project", "unavailable", count=DEFAULT_ATTEMPTS - 1)
    cloud.simulator.add_fault("list_quota_allowances", "unavailable", count=2)
    assert cloud.get_project(PROJECT).id == PROJECT
    assert cloud.list_quota_allowances(TENANT)
    assert cloud.simulator.list_faults() == []


def test_local_adapter_keyed_creates_are_retried_and_create_once(cloud: LocalCloud) -> None:
    cloud.simulator.add_fault("create_network", "unavailable", count=2)
    network = cloud.create_network(PROJECT, "keyed", idempotency_key="k-1")
    again = cloud.create_network(PROJECT, "keyed", idempotency_key="k-1")
    assert again.id == network.id
    assert [n.name for n in cloud.list_networks(PROJECT)].count("keyed") == 1


def test_local_adapter_unkeyed_creates_fail_at_once(cloud: LocalCloud) -> None:
    cloud.simulator.add_fault("create_network", "unavailable", count=2)
    with pytest.raises(Unavailable):
        cloud.create_network(PROJECT, "unkeyed")
    assert len(cloud.simulator.list_faults()) == 1  # exactly one attempt was made
    assert "unkeyed" not in [n.name for n in cloud.list_networks(PROJECT)]


def test_machine_api_retries_keyed_creates_but_not_deletes(cloud: LocalCloud) -> None:
    sim = cloud.simulator
    sim.add_fault("create_network", "unavailable", count=2)
    created = api_call(sim, "create_network", {"project_id": PROJECT, "name": "n", "idempotency_key": "k"})
    assert created["name"] == "n" and sim.list_faults() == []
    sim.add_fault("delete_network", "unavailable", count=1)
    with pytest.raises(Unavailable):
        api_call(sim, "delete_network", {"network_id": created["id"], "missing_ok": True})
    sim.add_fault("create_network", "unavailable", count=1)
    with pytest.raises(Unavailable):
        api_call(sim, "create_network", {"project_id": PROJECT, "name": "unkeyed"})
