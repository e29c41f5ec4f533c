"""Writing a preview in the requested format to stdout or a file (and the full JSON beside it)."""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from npa_pulumi.errors import EXIT_FAILED
from npa_pulumi.output.results import FleetResult
from npa_pulumi.output.streams import emit_json, json_text


def write_preview(
    result: FleetResult,
    output: str,
    out_file: str | None,
    json_out: str | None,
    plan: dict[str, Any] | None = None,
    sections: Sequence[tuple[str, str]] = (),
) -> int:
    """`plan` (the offline plan document) gives the html page its GPU models; `sections` are more of it
    (an earlier run's timeline: output/timeline.py)."""

    @functools.cache
    def fleet_json() -> dict[str, Any]:  # built once, for --json-out and the json or html output alike
        return result.to_json()

    if json_out:
        Path(json_out).write_text(json_text(fleet_json()))
    if output == "json":
        if out_file:
            Path(out_file).write_text(json_text(fleet_json()))
        else:
            emit_json(fleet_json())
    elif output == "html":
        from npa_pulumi.output.html_report import render_report

        page = render_report(fleet_json(), plan, sections=sections)
        if out_file:
            Path(out_file).write_text(page)
        else:
            print(page, end="")
    elif output == "markdown":
        from npa_pulumi.output.cost_render import cost_markdown
        from npa_pulumi.output.markdown import render_preview_markdown

        document = render_preview_markdown(result, extra=cost_markdown(result))
        if out_file:
            Path(out_file).write_text(document)
        else:
            print(document, end="")
    else:
        from npa_pulumi.output.text import print_fleet_result

        if out_file:
            buffer = io.StringIO()
            print_fleet_result(result, Console(file=buffer, width=160, highlight=False, no_color=True))
            Path(out_file).write_text(buffer.getvalue())
        else:
            print_fleet_result(result)
    return EXIT_FAILED if result.failed_count else 0
