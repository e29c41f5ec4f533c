"""Maintenance windows and exclusions as time arithmetic: is T inside a window of a cluster, when does the
next window open after T, which exclusions are in force at T. Pure: no clock is read here, callers pass T.

Wall-clock rules (a window is written in local time):
* a start that falls in a DST gap (02:30 on the night clocks jump from 02:00 to 03:00) opens at the same
  offset from the gap's start as written, i.e. at 03:30 — what `zoneinfo` gives for fold=0;
* a start that falls twice (the night clocks go back) opens at its first occurrence;
* the duration is elapsed time: a 4h window stays open 4 real hours whatever the clocks do meanwhile.
A cluster without windows may change at any time (the fleet has not asked for any).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from npa_pulumi.spec.maintenance_rules import (
    MAX_WINDOW,
    ExclusionScope,
    day_index,
    parse_duration,
    parse_instant,
    parse_start,
    parse_zone,
)
from npa_pulumi.spec.models import MaintenanceSpec

_EVERY_DAY = frozenset(range(7))


@dataclass(frozen=True)
class Window:
    """One recurring window: opens on `days` (0 = Monday) at local `start` in `zone`, for `duration`."""

    days: frozenset[int]
    start: time
    duration: timedelta
    zone: ZoneInfo

    def opening(self, day: date) -> datetime:
        """The UTC instant this window opens on local calendar `day` (fold=0: see the module's rules)."""
        # Through UTC and back is what moves a start inside a DST gap past the gap by the gap's length.
        return datetime.combine(day, self.start, tzinfo=self.zone).astimezone(UTC)

    def openings(self, after: datetime, before: datetime) -> Iterator[datetime]:
        """Every opening in [after, before), in order (UTC)."""
        # A day either side: an opening's local date can differ from its UTC date by up to a day.
        day = after.astimezone(self.zone).date() - timedelta(days=1)
        last = before.astimezone(self.zone).date() + timedelta(days=1)
        while day <= last:
            if day.weekday() in self.days:
                opening = self.opening(day)
                if after <= opening < before:
                    yield opening
            day += timedelta(days=1)


@dataclass(frozen=True)
class Exclusion:
    scope: ExclusionScope
    start: datetime | None  # UTC; None: in force from the start
    end: datetime  # UTC, exclusive
    reason: str = ""

    def in_force(self, moment: datetime) -> bool:
        return (self.start is None or self.start <= moment) and moment < self.end


@dataclass(frozen=True)
class MaintenancePolicy:
    """A cluster's windows and exclusions, parsed (a spec that passed validation parses completely)."""

    windows: tuple[Window, ...] = ()
    exclusions: tuple[Exclusion, ...] = ()

    def inside(self, moment: datetime) -> bool:
        """Whether `moment` is inside one of the windows (always, with none declared)."""
        if not self.windows:
            return True
        return any(self._open_at(window, _utc(moment)) for window in self.windows)

    @staticmethod
    def _open_at(window: Window, moment: datetime) -> bool:
        return any(
            opening + window.duration > moment
            for opening in window.openings(
                moment - MAX_WINDOW - timedelta(days=1), moment + timedelta.resolution
            )
        )

    def next_start(self, moment: datetime) -> datetime | None:
        """The first window opening strictly after `moment` (UTC); None without windows."""
        moment = _utc(moment)
        found = [
            opening
            for window in self.windows
            for opening in _first(window.openings(moment + timedelta.resolution, moment + timedelta(days=9)))
        ]
        return min(found) if found else None

    def open_until(self, moment: datetime) -> datetime | None:
        """When the window `moment` is inside closes (the latest end of those open); None when outside."""
        moment = _utc(moment)
        ends = [
            opening + window.duration
            for window in self.windows
            for opening in window.openings(
                moment - MAX_WINDOW - timedelta(days=1), moment + timedelta.resolution
            )
            if opening <= moment < opening + window.duration
        ]
        return max(ends) if ends else None

    def exclusions_at(self, moment: datetime) -> list[Exclusion]:
        """The exclusions in force at `moment`, soonest-ending first."""
        moment = _utc(moment)
        return sorted((e for e in self.exclusions if e.in_force(moment)), key=lambda e: e.end)

    def blocks(self, moment: datetime, scope: ExclusionScope) -> Exclusion | None:
        """The in-force exclusion holding back a change of `scope` (no-upgrades covers no-minor), if any."""
        covering = {scope} | ({ExclusionScope.NO_UPGRADES} if scope is ExclusionScope.NO_MINOR else set())
        found = [e for e in self.exclusions_at(moment) if e.scope in covering]
        return max(found, key=lambda e: e.end) if found else None


def _first(items: Iterator[datetime]) -> list[datetime]:
    return [item for item in (next(items, None),) if item is not None]


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("a moment must be timezone-aware")
    return moment.astimezone(UTC)


def policy_from_spec(block: MaintenanceSpec | None) -> MaintenancePolicy:
    """The policy of a validated `maintenance:` block (None: no windows, no exclusions)."""
    if block is None:
        return MaintenancePolicy()
    windows = []
    for window in block.windows:
        start, duration, zone = (
            parse_start(window.start),
            parse_duration(window.duration),
            parse_zone(window.time_zone),
        )
        indexes = [day_index(day) for day in window.days]
        if start is None or duration is None or zone is None or None in indexes:
            raise ValueError(f"invalid maintenance window {window!r} (the spec rules report it)")
        days = frozenset(i for i in indexes if i is not None) or _EVERY_DAY
        windows.append(Window(days, start, duration, zone))
    exclusions = []
    for item in block.exclusions:
        zone = parse_zone(item.time_zone) or ZoneInfo("UTC")
        end = parse_instant(item.end, zone, end_of_day=True)
        begin = parse_instant(item.start, zone, end_of_day=False) if item.start.strip() else None
        if end is None:
            raise ValueError(f"invalid maintenance exclusion {item!r} (the spec rules report it)")
        exclusions.append(Exclusion(ExclusionScope(item.scope), begin, end, item.reason))
    return MaintenancePolicy(tuple(windows), tuple(exclusions))


def describe_windows(block: MaintenanceSpec | None) -> list[str]:
    """Each window as people read it: `sat,sun 02:00 +4h Europe/Amsterdam`."""
    if block is None:
        return []
    return [f"{','.join(w.days) or 'daily'} {w.start} +{w.duration} {w.time_zone}" for w in block.windows]


__all__: Sequence[str] = (
    "Exclusion",
    "MaintenancePolicy",
    "Window",
    "describe_windows",
    "policy_from_spec",
)
