"""hashicorp/time (as pinned) on the local cloud: `time_static`, a timestamp taken once at create (or given as
`rfc3339`) and kept until `triggers` change (docs/resources/static.md). Import takes an RFC 3339 timestamp."""

from __future__ import annotations

import datetime as dt

from npa_pulumi.simulator.tfproviders.base import (
    CallContext,
    ProviderError,
    ProviderHandlers,
    State,
    StateOnly,
)


def parse_rfc3339(value: str) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None or "T" not in value.upper():
        raise ProviderError(
            "Invalid RFC3339 timestamp",
            f"{value!r} is not an RFC 3339 timestamp (YYYY-MM-DDTHH:MM:SSZ or with a ±HH:MM offset)",
        )
    return parsed


def format_rfc3339(moment: dt.datetime) -> str:
    """As Go's time.RFC3339: seconds, `Z` for UTC, else the offset."""
    text = moment.replace(microsecond=0).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def static_state(planned: State, moment: dt.datetime, rfc3339: str) -> State:
    utc = moment.astimezone(dt.UTC)
    return {
        **planned,
        "rfc3339": rfc3339,
        "id": rfc3339,
        # The provider splits the UTC time into its parts.
        "year": utc.year,
        "month": utc.month,
        "day": utc.day,
        "hour": utc.hour,
        "minute": utc.minute,
        "second": utc.second,
        "unix": int(moment.timestamp()),
    }


class TimeStatic(StateOnly):  # rfc3339 and triggers force replacement: nothing else changes
    def create(self, ctx: CallContext, planned: State) -> State:
        given = planned.get("rfc3339")
        if given:
            return static_state(planned, parse_rfc3339(given), given)
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        return static_state(planned, now, format_rfc3339(now))

    def import_(self, ctx: CallContext, import_id: str) -> State:
        return static_state({"triggers": None}, parse_rfc3339(import_id), import_id)


HANDLERS = ProviderHandlers(resources={"time_static": TimeStatic()})
