"""The fleet's `remediation:` block: safe defaults, overrides per project/cluster, located errors."""

from __future__ import annotations

import pytest

from npa_pulumi.spec import SpecError, parse_spec
from npa_pulumi.spec.constants import DEFAULT_LADDER, FaultReason, Rung
from npa_pulumi.spec.remediation import resolve

BASE = """\
apiVersion: npa.fleet/v0.0.1
name: fleet
projects:
  - name: research
    clusters:
      - name: train
        gpu_nodes: {count: 4, preset: 1gpu-16vcpu-200gb, platform: gpu-l40s-a}
      - name: eval
        gpu_nodes: {count: 2, preset: 1gpu-16vcpu-200gb, platform: gpu-l40s-a}
"""


def test_without_the_block_every_cluster_gets_the_safe_defaults() -> None:
    policy = resolve(parse_spec(BASE))
    train = policy.cluster("research/train")
    assert train.allow_active_gpu_workloads is False
    assert train.breaker_percent == 20 and policy.fleet_percent == 20 and policy.capacity_block_percent == 20
    assert all(train.ladder(reason) == DEFAULT_LADDER for reason in FaultReason)
    assert DEFAULT_LADDER[0] is Rung.REQUALIFY and DEFAULT_LADDER[-1] is Rung.FLAG_HARDWARE
    assert (policy.repeat_incidents, policy.repeat_window_s) == (3, 7 * 86400.0)
    assert train.escalate_after_s == 1800.0 and policy.window_s is None


def test_overrides_apply_to_the_clusters_they_select_only() -> None:
    text = BASE + (
        "remediation:\n"
        "  ladders:\n"
        "    not-ready: [cordon-and-report, flag-hardware]\n"
        "  breakers: {window: 5m, fleet_percent: 10}\n"
        "  repeat_offender: {incidents: 4, window: 48h}\n"
        "  overrides:\n"
        "    - clusters: [research/eval]\n"
        "      allow_active_gpu_workloads: true\n"
        "      breaker_percent: 50\n"
        "      ladders: {gpu-error: [remove-from-group]}\n"
    )
    policy = resolve(parse_spec(text))
    train, evaluate = policy.cluster("research/train"), policy.cluster("research/eval")
    assert train.ladder(FaultReason.NOT_READY) == (Rung.CORDON_AND_REPORT, Rung.FLAG_HARDWARE)
    assert evaluate.ladder(FaultReason.NOT_READY) == (Rung.CORDON_AND_REPORT, Rung.FLAG_HARDWARE)
    assert train.ladder(FaultReason.GPU_ERROR) == DEFAULT_LADDER
    assert evaluate.ladder(FaultReason.GPU_ERROR) == (Rung.REMOVE_FROM_GROUP,)
    assert (train.allow_active_gpu_workloads, evaluate.allow_active_gpu_workloads) == (False, True)
    assert (train.breaker_percent, evaluate.breaker_percent) == (20, 50)
    assert policy.window_s == 300.0 and policy.fleet_percent == 10
    assert (policy.repeat_incidents, policy.repeat_window_s) == (4, 48 * 3600.0)


@pytest.mark.parametrize(
    ("block", "line", "fragment"),
    [
        ("remediation:\n  ladders:\n    gpu-eror: [requalify]\n", 12, "unknown fault reason 'gpu-eror'"),
        ("remediation:\n  ladders:\n    gpu-error: [requalify, reboot]\n", 12, "unknown rung 'reboot'"),
        ("remediation:\n  ladders:\n    gpu-error: [requalify, requalify]\n", 12, "appears twice"),
        ("remediation:\n  ladders:\n    gpu-error: []\n", 12, "at least one rung"),
        ("remediation:\n  breakers:\n    cluster_percent: 0\n", 12, "between 1 and 100"),
        ("remediation:\n  breakers:\n    window: soon\n", 12, "is not a duration"),
        ("remediation:\n  repeat_offender:\n    incidents: 1\n", 12, "at least 2"),
        ("remediation:\n  escalate_after: never\n", 11, "is not a duration"),
        ("remediation:\n  overrides:\n    - clusters: [other/*]\n", 12, "matches no cluster"),
        ("remediation:\n  allow_gpu: true\n", 11, "allow_gpu"),
    ],
)
def test_bad_blocks_are_located_errors_that_say_what_is_valid(block: str, line: int, fragment: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(BASE + block, "fleet.yaml")
    problems = caught.value.problems
    assert any(fragment in p.message for p in problems), [p.message for p in problems]
    found = next(p for p in problems if fragment in p.message)
    assert found.path.startswith("remediation") and found.line == line
    if "unknown" in fragment:
        assert "requalify" in str(found.hint) or "gpu-error" in str(found.hint)
