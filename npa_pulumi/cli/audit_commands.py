"""`audit`: the fleet's audit trail, the records its mutating runs appended in the backend (sdk/audit.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from npa_pulumi.cli.common import output_option, run_guarded
from npa_pulumi.errors import UserInputError
from npa_pulumi.output.streams import emit_json


def _since(text: str | None) -> datetime | None:
    """`--since 2026-01-31` or an ISO time (UTC when it names no zone)."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UserInputError(f"--since: {text!r} is not a date (YYYY-MM-DD) or an ISO time") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@click.command("audit")
@click.option(
    "--spec", "-f", "spec_path", required=True, type=click.Path(dir_okay=False), help="The fleet spec."
)
@click.option(
    "--backend",
    default=None,
    metavar="URL",
    help="Pulumi backend (default: $PULUMI_BACKEND_URL, else file://~/.npa-pulumi/state).",
)
@click.option(
    "--since", default=None, metavar="DATE", help="Only records of runs that started then or later."
)
@output_option()
def audit_command(**kw: Any) -> None:
    """Who ran which change against the fleet: one record per up, destroy, adopt, cleanup and repair
    (verify-mig --reconcile, health --requalify), kept in the backend beside the stacks."""

    def body() -> int:
        from npa_pulumi.sdk.audit import audit

        records = audit(kw["spec_path"], kw["backend"], _since(kw["since"]))
        if kw["output"] == "json":
            emit_json({"records": [r.to_json() for r in records]})
            return 0
        if not records:
            click.echo("no audit records")
        for record in records:
            who = record.who
            actor = who.principal or "?"
            extra = ", ".join(
                part
                for part in (
                    f"profile {who.profile}" if who.profile else "",
                    f"user {who.os_user}@{who.host}" if who.os_user else "",
                    who.ci_run_url or "",
                )
                if part
            )
            command = record.command + (f" --{record.repair}" if record.repair else "")
            click.echo(f"{record.started_at}  {command:<8} {record.outcome:<16} by {actor} ({extra})")
            for stack in record.stacks:
                lifecycle = f" [{stack.lifecycle}]" if stack.lifecycle else ""
                detail = f" - {stack.detail}" if stack.detail else ""
                click.echo(f"    {stack.stack}: {stack.status}{lifecycle}{detail}")
        return 0

    run_guarded(body, kw["output"])


def register(group: click.Group) -> None:
    group.add_command(audit_command)
