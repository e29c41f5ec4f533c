"""Nebius maintenance events against the cluster's maintenance windows (engine/health/model.py): the next
opening, whether the SLA deadline comes first, soonest deadline first, and the text report's line."""

from __future__ import annotations

from datetime import UTC, datetime

from npa_pulumi.engine.health.model import against_window, by_deadline
from npa_pulumi.output.health import FleetHealth, Maintenance, ProjectHealth, render_text
from npa_pulumi.plan.windows import policy_from_spec
from npa_pulumi.spec.models import MaintenanceSpec

# Monday 2026-12-07 12:00 UTC; the window opens Saturdays 02:00 Europe/Amsterdam (01:00 UTC) for 4 hours.
NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)
SATURDAY = MaintenanceSpec.model_validate(
    {"windows": [{"days": ["sat"], "start": "02:00", "duration": "4h", "time_zone": "Europe/Amsterdam"}]}
)


def event(deadline: str, id_: str = "ev") -> Maintenance:
    return Maintenance(id=id_, reason="HW_GPU_XID_79", node="n1", cluster="f.p.c", sla_deadline=deadline)


def test_a_deadline_before_the_next_window_is_flagged_and_one_after_it_is_not() -> None:
    policy = policy_from_spec(SATURDAY)
    early, late = event("2026-12-10T00:00:00Z"), event("2026-12-14T00:00:00Z")
    for found in (early, late):
        against_window(found, policy, NOW)
        assert found.next_window == "2026-12-12T01:00:00+00:00"
    assert (early.before_window, late.before_window) == (True, False)


def test_inside_an_open_window_the_window_is_now_and_no_deadline_or_window_says_nothing() -> None:
    policy = policy_from_spec(SATURDAY)
    inside = datetime(2026, 12, 12, 2, tzinfo=UTC)
    found = event("2026-12-12T03:00:00Z")
    against_window(found, policy, inside)
    assert (found.next_window, found.before_window) == (inside.isoformat(), False)
    unknown = event("")
    against_window(unknown, policy, NOW)
    assert unknown.next_window == "2026-12-12T01:00:00+00:00" and unknown.before_window is None
    windowless = event("2026-12-10T00:00:00Z")
    against_window(windowless, None, NOW)
    assert (windowless.next_window, windowless.before_window) == (None, None)


def test_soonest_deadline_first_and_the_text_says_which_comes_first() -> None:
    events = [
        event("", "none"),
        event("2026-12-14T00:00:00Z", "late"),
        event("2026-12-10T00:00:00Z", "early"),
    ]
    assert [e.id for e in by_deadline(events)] == ["early", "late", "none"]
    policy = policy_from_spec(SATURDAY)
    for found in events:
        against_window(found, policy, NOW)
    project = ProjectHealth(project_key="p", project_id="project-1", maintenance=by_deadline(events))
    text = render_text(FleetHealth(fleet="f", cloud="local", min_usable=1.0, clusters=[], projects=[project]))
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("maintenance")]
    assert lines[0] == (
        "maintenance HW_GPU_XID_79 on f.p.c node n1 (early), deadline 2026-12-10T00:00:00Z: "
        "BEFORE the cluster's next maintenance window (2026-12-12T01:00:00+00:00)"
    )
    assert lines[1].endswith(": after the cluster's next maintenance window (2026-12-12T01:00:00+00:00)")
    assert lines[2] == "maintenance HW_GPU_XID_79 on f.p.c node n1 (none)"
