"""Maintenance windows and exclusions (`maintenance:`): their vocabulary, the parsing both the rules and the
window arithmetic (plan/windows.py) use, and the rules, with paths relative to the block.

A window is days + a local start (HH:MM) + a duration + an IANA time zone. Its duration is elapsed time
(a 4h window that spans a DST change is still 4 hours long); at most 7 days, so a weekly window cannot
overlap itself. An exclusion names the changes it holds back (`no-upgrades`, `no-minor`,
`no-disruptive`) and must end: an exclusion without an end is a freeze nobody remembers to lift.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from npa_pulumi.spec.durations import duration_seconds
from npa_pulumi.spec.models import (
    MaintenanceExclusionSpec,
    MaintenanceSpec,
    MaintenanceWindowSpec,
    WaitForJobsSpec,
)
from npa_pulumi.spec.names import PathTuple
from npa_pulumi.spec.problems import RawProblem


class ExclusionScope(StrEnum):
    """What an exclusion holds back while it is in force."""

    NO_UPGRADES = "no-upgrades"  # no Kubernetes version change at all (control plane or node group)
    NO_MINOR = "no-minor"  # no minor-version hop (a patch or node-release suffix change may go)
    NO_DISRUPTIVE = "no-disruptive"  # nothing that drains or replaces nodes (in-place changes may go)


DAYS: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_ALIASES = {name: index for index, name in enumerate(DAYS)} | {
    full: index
    for index, full in enumerate(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    )
}
MAX_WINDOW = timedelta(days=7)
_HHMM = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")
_DAY_HINT = "days are mon, tue, wed, thu, fri, sat, sun (or their full names); empty means every day"
_SCOPES = ", ".join(scope.value for scope in ExclusionScope)


def day_index(name: str) -> int | None:
    """0 (Monday) .. 6 (Sunday), or None for a name that is not a day."""
    return _DAY_ALIASES.get(name.strip().lower())


def parse_start(text: str) -> time | None:
    match = _HHMM.fullmatch(text.strip())
    return time(int(match.group(1)), int(match.group(2))) if match else None


def parse_zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):  # ValueError: a path-like or empty key
        return None


def parse_duration(text: str) -> timedelta | None:
    """The window's duration, or None when it is not a duration above 0 and at most 7 days."""
    seconds = duration_seconds(text)
    if seconds is None:
        return None
    length = timedelta(seconds=seconds)
    return length if length <= MAX_WINDOW else None


def parse_instant(text: str, zone: ZoneInfo, *, end_of_day: bool) -> datetime | None:
    """An ISO date (a whole day in `zone`: its end with `end_of_day`, else its start) or an ISO time (with
    an offset, or in `zone`), as an aware UTC datetime; None when it is neither."""
    text = text.strip()
    try:
        day = date.fromisoformat(text)
    except ValueError:
        day = None
    if day is not None:
        local = datetime.combine(day + timedelta(days=1) if end_of_day else day, time(0), tzinfo=zone)
        return local.astimezone(UTC)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=zone)).astimezone(UTC)


def check_maintenance(block: MaintenanceSpec, needs_selectors: bool = True) -> Iterator[RawProblem]:
    """`needs_selectors`: `wait_for_jobs` must name pods (an mk8s cluster's block); a soperator cluster
    waits for its Slurm jobs without one, and a project's block is judged in each of its clusters."""
    for index, window in enumerate(block.windows):
        yield from _window(window, ("windows", index))
    for index, exclusion in enumerate(block.exclusions):
        yield from _exclusion(exclusion, ("exclusions", index))
    if block.drain_time.strip() and duration_seconds(block.drain_time) is None:
        yield RawProblem(
            ("drain_time",), f"drain_time {block.drain_time!r} is not a duration", "e.g. 30m or 1h"
        )
    if block.wait_for_jobs is not None:
        yield from _wait_for_jobs(block.wait_for_jobs, ("wait_for_jobs",), needs_selectors)


_SELECTOR = re.compile(r"[A-Za-z0-9./_-]+(\s*(=|==|!=)\s*[A-Za-z0-9._-]*)?")


def _wait_for_jobs(wait: WaitForJobsSpec, path: PathTuple, needs_selectors: bool) -> Iterator[RawProblem]:
    if not wait.selectors and needs_selectors:
        yield RawProblem(
            (*path, "selectors"),
            "wait_for_jobs needs at least one label selector",
            "e.g. selectors: [app=train] (the pods of the jobs to wait for; only a soperator cluster "
            "waits without one, for its Slurm jobs)",
        )
    for index, selector in enumerate(wait.selectors):
        terms = [term.strip() for term in selector.split(",")]
        if not all(_SELECTOR.fullmatch(term) for term in terms):
            yield RawProblem(
                (*path, "selectors", index),
                f"{selector!r} is not a label selector",
                "key, key=value or key!=value, comma-separated (as `kubectl get pods -l` takes)",
            )
    if duration_seconds(wait.timeout) is None:
        yield RawProblem((*path, "timeout"), f"timeout {wait.timeout!r} is not a duration", "e.g. 30m or 4h")


def _window(window: MaintenanceWindowSpec, path: PathTuple) -> Iterator[RawProblem]:
    for index, day in enumerate(window.days):
        if day_index(day) is None:
            yield RawProblem((*path, "days", index), f"{day!r} is not a day of the week", _DAY_HINT)
    if parse_start(window.start) is None:
        yield RawProblem(
            (*path, "start"),
            f"start {window.start!r} is not a time of day" if window.start else "a window needs a start",
            "HH:MM on a 24-hour clock, e.g. '02:00' or '22:30'",
        )
    if parse_duration(window.duration) is None:
        yield RawProblem(
            (*path, "duration"),
            f"duration {window.duration!r} must be above 0 and at most 7 days"
            if window.duration
            else "a window needs a duration",
            "e.g. 30m, 4h or 48h (at most 168h)",
        )
    if parse_zone(window.time_zone) is None:
        yield RawProblem(
            (*path, "time_zone"),
            f"unknown time zone {window.time_zone!r}",
            "an IANA time zone such as UTC, Europe/Amsterdam or America/New_York",
        )


def _exclusion(exclusion: MaintenanceExclusionSpec, path: PathTuple) -> Iterator[RawProblem]:
    if exclusion.scope not in {scope.value for scope in ExclusionScope}:
        yield RawProblem(
            (*path, "scope"),
            f"unknown exclusion scope {exclusion.scope!r}"
            if exclusion.scope
            else "an exclusion needs a scope",
            f"expected {_SCOPES}",
        )
    zone = parse_zone(exclusion.time_zone)
    if zone is None:
        yield RawProblem(
            (*path, "time_zone"),
            f"unknown time zone {exclusion.time_zone!r}",
            "an IANA time zone such as UTC or Europe/Amsterdam",
        )
        zone = ZoneInfo("UTC")
    if not exclusion.end.strip():
        yield RawProblem(
            (*path, "end"),
            "an exclusion needs an end",
            "end: YYYY-MM-DD (through the end of that day) or an ISO time; a freeze must be lifted",
        )
        return
    end = parse_instant(exclusion.end, zone, end_of_day=True)
    if end is None:
        yield RawProblem(
            (*path, "end"),
            f"end {exclusion.end!r} is not a date or time",
            "YYYY-MM-DD, or an ISO time such as 2027-01-15T18:00+01:00",
        )
    if not exclusion.start.strip():
        return
    start = parse_instant(exclusion.start, zone, end_of_day=False)
    if start is None:
        yield RawProblem(
            (*path, "start"),
            f"start {exclusion.start!r} is not a date or time",
            "YYYY-MM-DD or an ISO time; leave it out for an exclusion already in force",
        )
    elif end is not None and start >= end:
        yield RawProblem((*path, "end"), "an exclusion must end after it starts")
