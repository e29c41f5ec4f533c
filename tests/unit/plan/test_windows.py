"""Maintenance windows across time zones and DST transitions: properties over random windows and
moments, and the transitions themselves pinned by hand (Amsterdam, New York, Lord Howe's half-hour shift,
Kolkata without DST, UTC)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npa_pulumi.plan.windows import Exclusion, MaintenancePolicy, Window, policy_from_spec
from npa_pulumi.spec.maintenance_rules import ExclusionScope
from npa_pulumi.spec.models import MaintenanceExclusionSpec, MaintenanceSpec, MaintenanceWindowSpec

ZONES = ["Europe/Amsterdam", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]

windows = st.builds(
    Window,
    days=st.frozensets(st.integers(0, 6), min_size=1),
    start=st.builds(time, st.integers(0, 23), st.sampled_from([0, 15, 30, 45])),
    duration=st.integers(1, 7 * 24 * 4).map(lambda q: timedelta(minutes=15 * q)),
    zone=st.sampled_from(ZONES).map(ZoneInfo),
)
# Moments around 2026-2027, dense near DST changes by construction of the range (minute resolution).
moments = st.integers(0, 2 * 365 * 24 * 60).map(
    lambda m: datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=m)
)


def _local(window: Window, moment: datetime) -> datetime:
    return moment.astimezone(window.zone)


def _is_opening(window: Window, moment: datetime) -> bool:
    """Independent check: `moment` is when the window opens on its local day — the written start on a
    listed day, or, for a start in a DST gap, the gap's end plus the same offset into it."""
    local = _local(window, moment)
    if local.weekday() not in window.days:
        return False
    written = datetime.combine(local.date(), window.start)
    if local.replace(tzinfo=None) == written:
        return True
    # A start that does not exist on that day: the wall clock jumped over it.
    naive_round_trip = datetime.combine(local.date(), window.start, tzinfo=window.zone)
    exists = naive_round_trip.astimezone(UTC).astimezone(window.zone).replace(tzinfo=None) == written
    return not exists and moment == naive_round_trip.astimezone(UTC)


@settings(max_examples=300, deadline=None)
@given(windows, moments)
def test_next_start_is_the_next_opening(window: Window, moment: datetime) -> None:
    policy = MaintenancePolicy((window,))
    opening = policy.next_start(moment)
    assert opening is not None and opening > moment
    assert opening - moment <= timedelta(days=7, hours=2)
    assert _is_opening(window, opening)
    assert policy.inside(opening)
    assert policy.inside(opening + window.duration - timedelta(seconds=1))
    # No opening is skipped. Starts are on quarter hours and every zone here is offset from UTC by
    # quarter hours, so every opening lies on the UTC quarter-hour grid: walk it up to the answer.
    probe = moment.replace(minute=moment.minute - moment.minute % 15) + timedelta(minutes=15)
    while probe < opening:
        assert not _is_opening(window, probe), f"skipped the opening at {probe}"
        probe += timedelta(minutes=15)


@settings(max_examples=300, deadline=None)
@given(windows, moments)
def test_inside_agrees_with_the_last_opening(window: Window, moment: datetime) -> None:
    policy = MaintenancePolicy((window,))
    earlier = list(window.openings(moment - timedelta(days=9), moment + timedelta(microseconds=1)))
    assert earlier, "a weekly window opens at least once in nine days"
    last = earlier[-1]
    assert _is_opening(window, last)
    # Durations are at most 7 days, so only the last opening can still be open (one a week at least
    # a day apart, with durations up to a week, can overlap: any of them counts).
    expected = any(o <= moment < o + window.duration for o in earlier)
    assert policy.inside(moment) is expected
    until = policy.open_until(moment)
    assert (until is not None) is expected
    if until is not None:
        assert until > moment


@settings(max_examples=200, deadline=None)
@given(windows, moments, moments)
def test_next_start_is_monotonic(window: Window, first: datetime, second: datetime) -> None:
    policy = MaintenancePolicy((window,))
    early, late = sorted((first, second))
    a, b = policy.next_start(early), policy.next_start(late)
    assert a is not None and b is not None and a <= b


def test_no_windows_means_any_time() -> None:
    policy = MaintenancePolicy()
    assert policy.inside(datetime(2026, 3, 29, 1, 30, tzinfo=UTC))
    assert policy.next_start(datetime(2026, 3, 29, tzinfo=UTC)) is None


# --- the transitions themselves -------------------------------------------------------------------------


def _window(zone: str, start: str, duration: str, days: list[str]) -> MaintenancePolicy:
    return policy_from_spec(
        MaintenanceSpec(
            windows=[MaintenanceWindowSpec(days=days, start=start, duration=duration, time_zone=zone)]
        )
    )


@pytest.mark.parametrize(
    ("zone", "start", "days", "after", "opens_utc"),
    [
        # Amsterdam springs forward 2026-03-29 02:00 CET -> 03:00 CEST: 02:30 does not exist, opens 03:30
        # CEST (01:30 UTC).
        (
            "Europe/Amsterdam",
            "02:30",
            ["sun"],
            datetime(2026, 3, 28, tzinfo=UTC),
            datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
        ),
        # It falls back 2026-10-25 03:00 CEST -> 02:00 CET: 02:30 happens twice, the first (00:30 UTC).
        (
            "Europe/Amsterdam",
            "02:30",
            ["sun"],
            datetime(2026, 10, 24, tzinfo=UTC),
            datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        ),
        # New York springs forward 2026-03-08 02:00 EST -> 03:00 EDT.
        (
            "America/New_York",
            "02:15",
            ["sun"],
            datetime(2026, 3, 7, tzinfo=UTC),
            datetime(2026, 3, 8, 7, 15, tzinfo=UTC),
        ),
        (
            "America/New_York",
            "01:30",
            ["sun"],
            datetime(2026, 11, 1, tzinfo=UTC),
            datetime(2026, 11, 1, 5, 30, tzinfo=UTC),
        ),
        # Lord Howe moves by half an hour: 02:00 -> 02:30 on 2026-10-04 (LHST +10:30 -> LHDT +11).
        (
            "Australia/Lord_Howe",
            "02:10",
            ["sun"],
            datetime(2026, 10, 3, tzinfo=UTC),
            datetime(2026, 10, 3, 15, 40, tzinfo=UTC),
        ),
        # Kolkata: +05:30 all year.
        (
            "Asia/Kolkata",
            "23:00",
            ["mon"],
            datetime(2026, 6, 1, tzinfo=UTC),
            datetime(2026, 6, 1, 17, 30, tzinfo=UTC),
        ),
        ("UTC", "00:00", [], datetime(2026, 12, 31, 23, 59, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)),
    ],
)
def test_openings_across_transitions(
    zone: str, start: str, days: list[str], after: datetime, opens_utc: datetime
) -> None:
    assert _window(zone, start, "1h", days).next_start(after) == opens_utc


def test_duration_is_elapsed_time_across_a_transition() -> None:
    # Saturday 22:00 CET + 8h ends at 07:00 CEST on Sunday (8 real hours), not 06:00.
    policy = _window("Europe/Amsterdam", "22:00", "8h", ["sat"])
    opening = datetime(2026, 3, 28, 21, 0, tzinfo=UTC)
    assert policy.next_start(opening - timedelta(minutes=1)) == opening
    assert policy.open_until(opening) == opening + timedelta(hours=8)
    assert policy.inside(datetime(2026, 3, 29, 4, 59, tzinfo=UTC))
    assert not policy.inside(datetime(2026, 3, 29, 5, 0, tzinfo=UTC))


def test_exclusions_in_force_and_what_they_block() -> None:
    block = MaintenanceSpec(
        exclusions=[
            MaintenanceExclusionSpec(scope="no-minor", end="2027-01-15", time_zone="Europe/Amsterdam"),
            MaintenanceExclusionSpec(scope="no-disruptive", start="2027-01-10", end="2027-01-11T06:00+00:00"),
        ]
    )
    policy = policy_from_spec(block)
    # A date ends at the end of that day in its zone: 2027-01-16 00:00 CET is 2027-01-15 23:00 UTC.
    assert policy.blocks(datetime(2027, 1, 15, 22, 59, tzinfo=UTC), ExclusionScope.NO_MINOR) is not None
    assert policy.blocks(datetime(2027, 1, 15, 23, 0, tzinfo=UTC), ExclusionScope.NO_MINOR) is None
    assert policy.blocks(datetime(2027, 1, 9, tzinfo=UTC), ExclusionScope.NO_DISRUPTIVE) is None
    held = policy.blocks(datetime(2027, 1, 10, 12, tzinfo=UTC), ExclusionScope.NO_DISRUPTIVE)
    assert held is not None and held.end == datetime(2027, 1, 11, 6, tzinfo=UTC)
    assert [e.scope for e in policy.exclusions_at(datetime(2027, 1, 10, 12, tzinfo=UTC))] == [
        ExclusionScope.NO_DISRUPTIVE,
        ExclusionScope.NO_MINOR,
    ]
    # no-upgrades holds back a minor hop too; no-minor does not hold back what is not a minor.
    everything = MaintenancePolicy(
        exclusions=(Exclusion(ExclusionScope.NO_UPGRADES, None, datetime(2030, 1, 1, tzinfo=UTC)),)
    )
    assert everything.blocks(datetime(2027, 1, 1, tzinfo=UTC), ExclusionScope.NO_MINOR) is not None
    assert policy.blocks(datetime(2027, 1, 1, tzinfo=UTC), ExclusionScope.NO_UPGRADES) is None


def test_naive_moments_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        MaintenancePolicy((Window(frozenset({0}), time(1), timedelta(hours=1), ZoneInfo("UTC")),)).inside(
            datetime(2026, 1, 1)
        )
