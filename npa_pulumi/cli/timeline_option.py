"""`--timeline FILE` of `report` and `preview --output html`: a run's timeline drawn on the page from the
trace an earlier command wrote with `--trace-file FILE` (output/timeline.py).

Not `report --trace FILE`: every fleet command's `--trace` already names where its own trace goes
(`--trace otlp`), and `--trace-file` writes one; `--timeline` reads one.
"""

from __future__ import annotations

import click

from npa_pulumi.errors import UserInputError

timeline_option = click.option(
    "--timeline",
    "timeline",
    default=None,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Draw the timeline of a run from its trace (the OTLP JSON file `--trace-file FILE` wrote): each "
    "stack's phases, the waves, waits and the longest path.",
)


def timeline_sections(path: str | None) -> list[tuple[str, str]]:
    """The page's timeline section for `--timeline FILE` (none without it); bad input (exit 2) when the
    file is no trace of an npa-pulumi run."""
    if not path:
        return []
    from npa_pulumi.output.timeline import TraceError, load_timeline, timeline_section

    try:
        timeline = load_timeline(path)
    except TraceError as err:
        raise UserInputError(f"--timeline {path}: {err}") from None
    return [("Timeline", timeline_section(timeline))]
