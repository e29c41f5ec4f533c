"""Waiting for running jobs before a disruptive change (kube/drain.py `running_jobs`, `wait_for_jobs`) and
the spec's `maintenance.wait_for_jobs` rules: a job pod that ends within the timeout is waited for and
never evicted; one that does not is named when the wait gives up."""

from __future__ import annotations

from typing import Any

import pytest
from fake_clock import Clock

from npa_pulumi.kube import drain as kd
from npa_pulumi.spec import SpecError, parse_spec

JSON = dict[str, Any]


def pod(name: str, phase: str, namespace: str = "team", **labels: str) -> JSON:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}, "status": {"phase": phase}}


class Cluster:
    """A cluster's API as far as the wait reads it: pods listed by selector (the API server filters;
    this fake matches `key=value` only). Any write would fail: the wait never evicts."""

    def __init__(self, pods: list[JSON]) -> None:
        self.pods = pods
        self.lists: list[str] = []

    def list(self, path: str, label_selector: str = "") -> list[JSON]:
        assert path == "/api/v1/pods"
        self.lists.append(label_selector)
        key, _, value = label_selector.partition("=")
        return [p for p in self.pods if p["metadata"]["labels"].get(key) == value]

    def evict(self, *args: Any, **kwargs: Any) -> bool:
        raise AssertionError("a job wait never evicts")


def test_running_jobs_are_the_pending_or_running_pods_of_any_selector() -> None:
    cluster = Cluster(
        [
            pod("train-0", "Running", app="train"),
            pod("train-1", "Succeeded", app="train"),
            pod("eval-0", "Pending", namespace="eval", job="eval"),
            pod("web-0", "Running", app="web"),
        ]
    )
    found = kd.running_jobs(cluster, ["app=train", "job=eval"])  # type: ignore[arg-type]
    assert found == ["eval/eval-0", "team/train-0"]
    assert cluster.lists == ["app=train", "job=eval"]


def test_a_job_that_ends_within_the_timeout_is_waited_for_and_never_evicted() -> None:
    clock = Clock()
    job = pod("train-0", "Running", app="train")
    cluster = Cluster([job])

    def running() -> list[str]:
        if clock.now >= 50:  # the job finishes 50 s into the wait
            job["status"]["phase"] = "Succeeded"
        return kd.running_jobs(cluster, ["app=train"])  # type: ignore[arg-type]

    waited = kd.wait_for_jobs(running, timeout_s=600, poll_s=10, clock=clock, sleep=clock.sleep)
    assert waited.cleared and waited.seen == ("team/train-0",) and waited.waited_s == 50


def test_a_job_still_running_at_the_timeout_is_named() -> None:
    clock = Clock()
    cluster = Cluster([pod("train-0", "Running", app="train"), pod("train-1", "Running", app="train")])
    waited = kd.wait_for_jobs(
        lambda: kd.running_jobs(cluster, ["app=train"]),  # type: ignore[arg-type]
        timeout_s=95,
        poll_s=10,
        clock=clock,
        sleep=clock.sleep,
    )
    assert not waited.cleared and waited.still == ("team/train-0", "team/train-1")
    assert waited.waited_s == 95  # the last sleep is cut to the timeout


def test_no_running_job_means_no_wait() -> None:
    clock = Clock()
    waited = kd.wait_for_jobs(lambda: [], timeout_s=600, clock=clock, sleep=clock.sleep)
    assert waited.cleared and waited.waited_s == 0 and waited.seen == ()


SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: jobs
region: eu-north1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  maintenance:
    wait_for_jobs: WAIT
projects:
  - name: p
    clusters:
      - name: a
"""


def test_the_spec_takes_selectors_and_a_timeout() -> None:
    spec = parse_spec(
        SPEC.replace("WAIT", "{selectors: ['app=train', 'batch.kubernetes.io/job-name'], timeout: 4h}")
    )
    (_, cluster), *_ = spec.cluster_targets()
    assert cluster.maintenance is not None and cluster.maintenance.wait_for_jobs is not None
    assert cluster.maintenance.wait_for_jobs.selectors == ["app=train", "batch.kubernetes.io/job-name"]


@pytest.mark.parametrize(
    ("wait", "path", "message"),
    [
        ("{selectors: []}", "wait_for_jobs.selectors", "at least one label selector"),
        ("{selectors: ['app in (a b)']}", "wait_for_jobs.selectors[0]", "is not a label selector"),
        ("{selectors: [app=train], timeout: soon}", "wait_for_jobs.timeout", "is not a duration"),
    ],
)
def test_bad_wait_for_jobs_is_refused_naming_its_line(wait: str, path: str, message: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_spec(SPEC.replace("WAIT", wait))
    (problem,) = raised.value.problems
    assert problem.path.endswith(path) and message in problem.message and problem.line == 7


MIXED = """\
apiVersion: npa.fleet/v0.0.1
name: jobs
region: eu-north1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - name: p
    maintenance:
      wait_for_jobs: {timeout: 2h}
    clusters:
      - name: slurm
        backend: soperator
        soperator:
          slurm_operator_version: "4.1.6"
          workers:
            - { name: cpu, platform: cpu-d3, preset: 16vcpu-64gb, size: 2 }
"""


def test_a_soperator_cluster_waits_for_its_slurm_jobs_without_selectors() -> None:
    spec = parse_spec(MIXED)
    (_, cluster), *_ = spec.cluster_targets()
    assert cluster.maintenance is not None and cluster.maintenance.wait_for_jobs is not None
    assert cluster.maintenance.wait_for_jobs.selectors == []


def test_an_mk8s_cluster_of_that_project_needs_selectors_at_the_projects_line() -> None:
    with pytest.raises(SpecError) as raised:
        parse_spec(MIXED + "      - name: train\n        backend: mk8s\n")
    (problem,) = raised.value.problems
    assert problem.path.endswith("projects[0].maintenance.wait_for_jobs.selectors"), problem.path
    assert "at least one label selector" in problem.message and problem.line == 9
