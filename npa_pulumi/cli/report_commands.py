"""`report`: the fleet as one self-contained HTML page (output/html_report.py), from the same data
`status --output json` prints (plus the offline plan, for GPU models, and `health`'s read of the clusters'
nodes and their projects' maintenance), from anywhere the backend is reachable. Read-only."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from npa_pulumi.cli.common import run_guarded, stderr_console
from npa_pulumi.cli.fleet_options import fleet_fields, fleet_options, selection
from npa_pulumi.cli.timeline_option import timeline_option, timeline_sections
from npa_pulumi.errors import EXIT_FAILED, UserInputError
from npa_pulumi.runtime.files import write_atomically


@click.command("report")
@fleet_options
@click.option(
    "--output",
    "-o",
    "output_path",
    required=True,
    metavar="FILE",
    help="The HTML file to write (`-`: stdout).",
)
@click.option(
    "--from-json",
    "from_json",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="Render this `status --output json` (or `preview --output json`) document instead of reading "
    "the backend and the cloud (the audit trail is not read either).",
)
@click.option(
    "--health/--no-health",
    default=True,
    show_default=True,
    help="Read the GPU health now (as `health` does, through the registered kubeconfigs) for its section "
    "of the page; with --from-json only --health-json gives it.",
)
@click.option(
    "--health-json",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="Render this `health --output json` document as the GPU health section instead of reading it.",
)
@timeline_option
def report_command(**kw: Any) -> None:
    """Write the fleet report page: a grid of projects × clusters coloured by lifecycle, per cluster GPUs
    by model, node groups, the health gate's outcome and evidence, kube context, drift and cost when
    known, a chart of GPUs per project, the GPU health now (usable, degraded, under maintenance,
    unqualified; nodes that are not usable; maintenance events), a detail section per cluster, the last
    audit records, and with --timeline a run's timeline. One self-contained file (no network, no scripts);
    nothing secret in it. Exit 1 when a cluster is failed (the page is written)."""

    def body() -> int:
        import json

        from npa_pulumi.output.html_report import lifecycle_of, render_report
        from npa_pulumi.sdk import fleet as sdk

        chosen = selection(kw)
        sections = timeline_sections(kw["timeline"])  # bad input before anything is read
        plan = sdk.plan(
            kw["spec_path"],
            only_projects=chosen.projects,
            only_clusters=chosen.clusters,
            project_prefix=chosen.prefix,
        )
        if kw["from_json"]:
            try:
                document = json.loads(Path(kw["from_json"]).read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                raise UserInputError(f"--from-json {kw['from_json']}: not a JSON document ({err})") from None
            if not isinstance(document, dict) or "clusters" not in document:
                raise UserInputError(f"--from-json {kw['from_json']}: not a status or preview document")
            audit = None
        else:
            result = sdk.status(kw["spec_path"], sdk.StatusRequest(**fleet_fields(kw, chosen)))
            document = result.to_json()
            audit = _audit_records(kw["spec_path"], result.backend)
        health = _health_document(kw, chosen)
        page = render_report(document, plan, sections=sections, audit=audit, health=health)
        if kw["output_path"] == "-":
            sys.stdout.write(page)
        else:
            target = Path(kw["output_path"])
            if target.is_dir():
                raise UserInputError(f"--output {target} is a directory; name the HTML file to write")
            write_atomically(target, page)
            stderr_console.print(f"wrote {target} ({len(document.get('clusters') or [])} cluster(s))")
        failed = [
            c for c in document.get("clusters") or [] if lifecycle_of(str(c.get("status"))).value == "failed"
        ]
        return EXIT_FAILED if failed else 0

    run_guarded(body)


def _audit_records(spec_path: str, backend: str) -> list[dict[str, Any]]:
    """The fleet's audit records for the page, or the one entry that says why there are none here."""
    from npa_pulumi.sdk.audit import AuditTrailUnavailable, audit

    try:
        return [record.to_json() for record in audit(spec_path, backend)]
    except AuditTrailUnavailable as err:
        return [{"unavailable": str(err)}]


def _health_document(kw: dict[str, Any], chosen: Any) -> dict[str, Any] | None:
    """The health section's document: --health-json, else a read now (not with --from-json, which renders
    what was saved, nor with --no-health)."""
    import json

    from npa_pulumi.sdk import fleet as sdk

    if kw["health_json"]:
        try:
            document = json.loads(Path(kw["health_json"]).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise UserInputError(f"--health-json {kw['health_json']}: not a JSON document ({err})") from None
        if not isinstance(document, dict) or document.get("command") != "health":
            raise UserInputError(f"--health-json {kw['health_json']}: not a `health --output json` document")
        return document
    if kw["from_json"] or not kw["health"]:
        return None
    return sdk.health(kw["spec_path"], sdk.HealthRequest(**fleet_fields(kw, chosen))).to_json()


def register(group: click.Group) -> None:
    group.add_command(report_command)
