"""`up` under maintenance windows and exclusions (plan/deferral.py): which deployed cluster is deferred,
for which of its Terraform changes, and when they may next start."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from npa_pulumi.plan.deferral import defer, next_opening, restricted
from npa_pulumi.plan.windows import MaintenancePolicy, policy_from_spec
from npa_pulumi.spec.models import MaintenanceExclusionSpec, MaintenanceSpec, MaintenanceWindowSpec

# 2026-12-09 is a Wednesday. The window: Saturdays 02:00-06:00 UTC.
WEDNESDAY_NOON = datetime(2026, 12, 9, 12, 0, tzinfo=UTC)
SATURDAY_3AM = datetime(2026, 12, 12, 3, 0, tzinfo=UTC)
SATURDAY_OPENS = datetime(2026, 12, 12, 2, 0, tzinfo=UTC)
WINDOW = MaintenanceWindowSpec(days=["sat"], start="02:00", duration="4h", time_zone="UTC")


def _policy(*exclusions: tuple[str, str], windows: bool = True) -> MaintenancePolicy:
    return policy_from_spec(
        MaintenanceSpec(
            windows=[WINDOW] if windows else [],
            exclusions=[MaintenanceExclusionSpec(scope=s, end=e) for s, e in exclusions],
        )
    )


def _change(address: str, kind: str, reason: str, **attributes: tuple[Any, Any]) -> dict[str, Any]:
    return {
        "address": address,
        "disruption": {"class": kind, "reason": reason},
        "attributes": [{"name": n, "before": b, "after": a} for n, (b, a) in attributes.items()],
    }


REPLACE = _change("terraform_data.gpu_node_group[0]", "disruptive", "node group replaced")
SCALE_UP = _change("nebius_mk8s_v1_node_group.cpu", "in-place", "scale up by 1")
MINOR = _change(
    "nebius_mk8s_v1_cluster.k8s-cluster",
    "disruptive",
    "control-plane Kubernetes version change",
    **{"control_plane.version": ("1.31", "1.32")},
)
PATCH = _change(
    "nebius_mk8s_v1_node_group.gpu",
    "disruptive",
    "Kubernetes version change",
    version=("1.31", "1.31-nebius-node.2"),
)


def _plan(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"resources": list(resources)}


def test_outside_a_window_a_disruptive_change_defers_the_cluster_and_names_the_next_window() -> None:
    deferral = defer(_policy(), WEDNESDAY_NOON, _plan(SCALE_UP, REPLACE))
    assert deferral is not None
    assert [c.to_dict() for c in deferral.changes] == [
        {"resource": REPLACE["address"], "reason": "node group replaced", "held_by": "outside-window"}
    ]
    assert deferral.next_window == SATURDAY_OPENS
    document = deferral.to_dict()
    assert document["inside_window"] is False and document["next_window"] == SATURDAY_OPENS.isoformat()
    assert "outside its maintenance windows" in document["reason"]


def test_outside_a_window_in_place_changes_apply() -> None:
    assert defer(_policy(), WEDNESDAY_NOON, _plan(SCALE_UP)) is None


def test_inside_a_window_everything_applies() -> None:
    assert not restricted(_policy(), SATURDAY_3AM)
    assert defer(_policy(), SATURDAY_3AM, _plan(REPLACE, MINOR)) is None


def test_without_windows_or_exclusions_nothing_is_ever_held() -> None:
    assert defer(MaintenancePolicy(), WEDNESDAY_NOON, None) is None


@pytest.mark.parametrize("plan", [None, {"error": "terraform plan failed: boom"}, {"skipped": "x"}])
def test_an_unread_plan_is_assumed_disruptive_outside_a_window(plan: dict[str, Any] | None) -> None:
    deferral = defer(_policy(), WEDNESDAY_NOON, plan)
    assert deferral is not None
    (change,) = deferral.changes
    assert "assumed disruptive" in change.reason and change.held_by == "outside-window"


def test_no_disruptive_holds_disruptive_changes_inside_a_window_until_it_ends() -> None:
    policy = _policy(("no-disruptive", "2026-12-12"))  # through Saturday; the next window is a week on
    deferral = defer(policy, SATURDAY_3AM, _plan(REPLACE, SCALE_UP))
    assert deferral is not None and [c.held_by for c in deferral.changes] == ["no-disruptive"]
    assert deferral.next_window == datetime(2026, 12, 19, 2, 0, tzinfo=UTC)
    assert [e.scope.value for e in deferral.exclusions] == ["no-disruptive"]


def test_no_minor_holds_a_minor_hop_but_not_a_node_release_change_inside_a_window() -> None:
    policy = _policy(("no-minor", "2027-01-15"))
    deferral = defer(policy, SATURDAY_3AM, _plan(MINOR, PATCH))
    assert deferral is not None
    assert [(c.resource, c.held_by) for c in deferral.changes] == [(MINOR["address"], "no-minor")]
    # The first window after the freeze ends (2027-01-16 00:00 UTC, a Saturday): 02:00 that day.
    assert deferral.next_window == datetime(2027, 1, 16, 2, 0, tzinfo=UTC)


def test_no_upgrades_holds_every_version_change_even_without_windows() -> None:
    policy = _policy(("no-upgrades", "2027-01-15"), windows=False)
    deferral = defer(policy, WEDNESDAY_NOON, _plan(MINOR, PATCH, REPLACE))
    assert deferral is not None
    assert [c.held_by for c in deferral.changes] == ["no-upgrades", "no-upgrades"]
    # No windows: the changes may go when the freeze ends.
    assert deferral.next_window == datetime(2027, 1, 16, tzinfo=UTC)


def test_an_exclusion_that_has_ended_holds_nothing() -> None:
    policy = _policy(("no-disruptive", "2026-12-01"), windows=False)
    assert not restricted(policy, WEDNESDAY_NOON)
    assert defer(policy, WEDNESDAY_NOON, _plan(REPLACE)) is None


def test_next_opening_inside_a_window_is_now() -> None:
    assert next_opening(_policy(), SATURDAY_3AM) == SATURDAY_3AM
