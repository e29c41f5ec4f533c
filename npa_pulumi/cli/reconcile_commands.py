"""`reconcile storage-account`: the teardown guide's legacy evidence for a storage service account that no
record proves npa created (docs/teardown.md); it proves the exact account and records an attestation,
and never deletes anything (the next `destroy --delete-storage-identity` does, through its guards)."""

from __future__ import annotations

from typing import Any

import click

from npa_pulumi.cli.common import output_option, run_guarded, stderr_console
from npa_pulumi.cli.fleet_options import fleet_fields, fleet_options, selection
from npa_pulumi.errors import UserInputError
from npa_pulumi.output.streams import emit_json


@click.group("reconcile")
def reconcile_group() -> None:
    """Record evidence the fleet's teardown needs and cannot find on its own."""


@reconcile_group.command("storage-account")
@fleet_options
@output_option()
@click.option("--project", "project_key", required=True, help="The spec's project (its key).")
@click.option("--id", "account_id", required=True, help="The exact service account id (never a name).")
@click.option("--reason", default="", help="The evidence that npa created the account (recorded as given).")
@click.option(
    "--attest-npa-created",
    is_flag=True,
    help="Record, as the operator, that npa created this account (required to record).",
)
@click.option("--dry-run", is_flag=True, help="Prove the account only; record nothing.")
@click.option("--yes", "-y", is_flag=True, help="Record without asking.")
def storage_account_command(**kw: Any) -> None:
    """Prove the exact storage service account of a project (id, name, project, tenant, profile) and record
    an operator attestation that npa created it, so `destroy --delete-storage-identity` may delete it."""

    def body() -> int:
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import AttestRequest

        dry_run = kw["dry_run"]
        if not dry_run and not kw["attest_npa_created"]:
            raise UserInputError("recording an attestation needs --attest-npa-created (or --dry-run)")
        if not dry_run and not kw["yes"]:
            click.confirm(f"Attest that npa created service account {kw['account_id']}?", abort=True)
        chosen = selection(kw)
        request = AttestRequest(
            **fleet_fields(kw, chosen, show_progress=False),
            project_key=kw["project_key"],
            account_id=kw["account_id"],
            reason=kw["reason"],
            dry_run=dry_run,
        )
        document = sdk.attest_storage_account(sdk.select(kw["spec_path"], chosen), request)
        if kw["output"] == "json":
            emit_json(document)
        else:
            stderr_console.print(
                f"service account {kw['account_id']}: "
                + (
                    "proved; nothing recorded (--dry-run)"
                    if dry_run
                    else f"attested in {document.get('path')}"
                )
                if document.get("attestation")
                else str(document.get("reason")),
                markup=False,
                soft_wrap=True,
            )
        return 0

    run_guarded(body, kw["output"])


def register(group: click.Group) -> None:
    group.add_command(reconcile_group)
