"""`npa-pulumi approve`: approve a staged rollout's wave (sdk/approvals.py; docs/rollouts.md)."""

from __future__ import annotations

from typing import Any

import click

from npa_pulumi.cli.common import output_option, run_guarded
from npa_pulumi.cli.fleet_options import fleet_fields, fleet_options, selection


@click.command("approve")
@fleet_options
@output_option()
@click.option("--wave", type=int, required=True, help="The wave of the spec's rollout.approval.")
def approve_command(**kw: Any) -> None:
    """Approve wave N of the spec's rollout (its `rollout.approval`): recorded in the backend's audit
    trail with who approved and the spec's digest. A run's own identity never counts."""

    def body() -> int:
        from npa_pulumi.output.streams import emit_json
        from npa_pulumi.sdk.approvals import approve
        from npa_pulumi.sdk.requests import FleetRequest

        chosen = selection(kw)
        request = FleetRequest(**fleet_fields(kw, chosen))
        document = approve(kw["spec_path"], kw["wave"], request)
        if kw["output"] == "json":
            emit_json(document)
        else:
            click.echo(f"approved wave {document['wave']} of {document['spec_digest']} as {document['by']}")
        return 0

    run_guarded(body, kw["output"])


def register(group: click.Group) -> None:
    group.add_command(approve_command)
