"""A stack's status is one enum (output/results.py StackStatus) whose JSON values are the strings every
document has always carried; each place that makes a status draws from it, and nothing else is one."""

from __future__ import annotations

import json

import pydantic
import pytest

from npa_pulumi.engine import lifecycle
from npa_pulumi.engine.operations.adopt import Verdict
from npa_pulumi.output.health import ClusterHealth, HealthStatus
from npa_pulumi.output.results import FAILED_LIFECYCLES, FleetResult, StackResult, StackStatus


def _stack(status: str) -> StackResult:
    return StackResult(stack="f.p.c", kind="cluster", project_key="p", cluster_name="c", status=status)


def test_a_status_dumps_as_the_plain_string_it_always_was() -> None:
    result = FleetResult(command="up", fleet="f", cloud="local", backend="file://x")
    result.stacks = [_stack("deployed"), _stack("deployed-validation-failed"), _stack("deployed")]
    document = result.to_json()
    assert document["totals"] == {
        "stacks": 3,
        "clusters": 3,
        "failed": 1,
        "deployed": 2,
        "deployed-validation-failed": 1,
    }
    assert [type(s["status"]) for s in document["stacks"]] == [str, str, str]
    assert [type(c["status"]) for c in document["clusters"]] == [str, str, str]
    assert json.loads(json.dumps(document))["stacks"][1]["status"] == "deployed-validation-failed"
    assert FleetResult.from_json(document).stacks[1].status is StackStatus.DEPLOYED_VALIDATION_FAILED


def test_a_status_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError):
        _stack("kinda-deployed")


def test_every_state_a_run_records_is_a_status() -> None:
    known = {s.value for s in StackStatus}
    assert {*lifecycle.RUNNING_STATES, lifecycle.DESTROY_INCOMPLETE} <= known  # what `status` shows
    assert {v.value for v in Verdict} <= known  # adopt lists its verdicts
    assert all(isinstance(s, StackStatus) for s in FAILED_LIFECYCLES)


def test_health_statuses_dump_as_their_values() -> None:
    entry = ClusterHealth(stack="s", project_key="p", cluster_name="c", kube_context="k", status="ok")
    assert entry.status is HealthStatus.OK and entry.model_dump(mode="json")["status"] == "ok"
    assert not entry.failed
    assert ClusterHealth.model_validate({**entry.model_dump(), "status": "below-min-usable"}).failed
