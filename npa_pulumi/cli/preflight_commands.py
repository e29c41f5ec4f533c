"""`npa-pulumi preflight`: quota and capacity-block budgeting for the selected targets, read-only."""

from __future__ import annotations

from typing import Any

import click

from npa_pulumi.cli.common import output_option, run_guarded
from npa_pulumi.cli.fleet_options import fleet_fields, fleet_options, selection
from npa_pulumi.errors import EXIT_FAILED
from npa_pulumi.output.streams import emit_json, stdout_console


@click.command("preflight")
@fleet_options
@output_option()
def preflight_command(**kw: Any) -> None:
    """Check that the tenant's quota and reserved capacity fit the selection (exit 1 on any shortfall).

    Reads only; nothing is created. A deployed cluster is charged only what the live cloud proves it does
    not hold yet (its project and cluster, then each node group's template, workers and STRICT reservation
    binding; not the stack's fingerprint, so an upgrade or a gate-only edit charges nothing), in full when
    the live cloud does not prove it; the report says why for each. The terraform/tofu that would run the
    selection's cluster stacks is checked against the recipe's own `required_version` first, as `up` does
    before its first mutation."""

    def body() -> int:
        from npa_pulumi.preflight import print_report
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import FleetRequest

        chosen = selection(kw)
        request = FleetRequest(**fleet_fields(kw, chosen, show_progress=False))
        report = sdk.preflight(sdk.select(kw["spec_path"], chosen), request)
        if kw["output"] == "json":
            emit_json(report.to_json())
        else:
            print_report(report, stdout_console())
        return 0 if report.ok else EXIT_FAILED

    run_guarded(body, kw["output"])


def register(group: click.Group) -> None:
    group.add_command(preflight_command)
