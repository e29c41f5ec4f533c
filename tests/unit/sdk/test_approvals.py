"""`rollout.approval` in the spec and `npa-pulumi approve`'s refusals (sdk/approvals.py): a wave that is not
the spec's approval gate is refused before anything is opened or written."""

from __future__ import annotations

import pytest

from npa_pulumi.errors import UserInputError
from npa_pulumi.plan.rollout import RolloutPolicy
from npa_pulumi.sdk.approvals import approve
from npa_pulumi.spec import SpecError, parse_spec

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: gated
region: eu-north1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
rollout:
  waves: [{clusters: [p/canary]}, {rest: true}]
  approval: APPROVAL
projects:
  - name: p
    clusters:
      - name: canary
      - name: a
"""


def test_the_approval_gate_reaches_the_rollout_policy() -> None:
    spec = parse_spec(SPEC.replace("APPROVAL", "{before: 2, min: 2}"))
    assert spec.rollout is not None
    policy = RolloutPolicy.from_spec(spec.rollout)
    assert (policy.approval_before, policy.approval_min) == (2, 2)


@pytest.mark.parametrize(
    ("approval", "path", "message"),
    [
        ("{before: 1}", "rollout.approval.before", "names no wave after the first"),
        ("{before: 3}", "rollout.approval.before", "names no wave after the first"),
        ("{before: 2, min: 0}", "rollout.approval.min", "at least 1"),
    ],
)
def test_a_bad_approval_gate_is_refused_naming_its_line(approval: str, path: str, message: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_spec(SPEC.replace("APPROVAL", approval))
    (problem,) = raised.value.problems
    assert problem.path == path and message in problem.message and problem.line == 8


def test_approving_a_wave_that_is_not_the_gate_is_refused_before_anything() -> None:
    spec = parse_spec(SPEC.replace("APPROVAL", "{before: 2}"))
    with pytest.raises(UserInputError, match="asks approval for wave 2; nothing recorded"):
        approve(spec, 3)
    without = parse_spec(SPEC.replace("  approval: APPROVAL\n", ""))
    with pytest.raises(UserInputError, match=r"no rollout\.approval"):
        approve(without, 2)
