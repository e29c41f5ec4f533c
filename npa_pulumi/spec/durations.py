"""Durations as people write them in a spec or on a command line: `90`, `90s`, `5m`, `1h`, `1.5m`, `7d`."""

from __future__ import annotations

import re

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")
EXAMPLES = "a positive duration such as 30s, 5m or 1h"


def duration_seconds(text: str) -> float | None:
    """The duration in seconds; None when `text` is not a positive duration."""
    match = _DURATION.fullmatch(text)
    if match is None or float(match.group(1)) <= 0:
        return None
    return float(match.group(1)) * _UNITS[match.group(2)]


def describe(seconds: float) -> str:
    """A duration for people: `45s`, `10m`, `1h30m`."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"
