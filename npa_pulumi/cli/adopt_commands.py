"""`adopt`: take over the clusters the original `npa fleet` deployed, without a change in the cloud."""

from __future__ import annotations

from typing import Any

import click

from npa_pulumi.cli.common import output_option, run_guarded
from npa_pulumi.cli.fleet_options import fleet_fields, fleet_options, selection
from npa_pulumi.cli.fleet_output import approver, finish, nothing_to_do
from npa_pulumi.cli.retry_commands import render_retry


@click.command("adopt")
@fleet_options
@output_option()
@click.option(
    "--from",
    "source",
    default=None,
    type=click.Path(file_okay=False),
    help="The original's fleet directory, holding <project>/<cluster>/ installs. Default: "
    "~/.npa/fleet/<spec name>.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Only say what each selected cluster is: found, not-found, mismatched, already-adopted or refused.",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--health-gate/--no-health-gate",
    default=True,
    show_default=True,
    help="Deployed only once the GPU health gate passes on the adopted cluster, as after `up`.",
)
def adopt_command(**kw: Any) -> None:
    """Take over clusters the original `npa fleet` deployed: no cloud change, no redeploy.

    Every selected cluster's install (Terraform state and tfvars, and its env sidecar) is read, never
    written, and proved against the live cloud and the spec; then, if every one is found, its project and
    cluster stacks are created holding what exists (all or nothing). See docs/adoption.md.
    """

    def body() -> int:
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import AdoptRequest

        chosen = selection(kw)
        request = AdoptRequest(
            **fleet_fields(kw, chosen),
            source=kw["source"],
            dry_run=kw["dry_run"],
            health_gate=kw["health_gate"],
        )
        selected = sdk.select(kw["spec_path"], chosen)
        if not selected.targets:
            return nothing_to_do("adopt", selected, request, kw["output"])
        return finish(sdk.adopt(selected, request, approver(kw["yes"]), render_retry), kw["output"])

    run_guarded(body, kw["output"])


def register(group: click.Group) -> None:
    group.add_command(adopt_command)
