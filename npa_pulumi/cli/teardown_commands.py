"""`destroy` (from a spec, or continuing a receipt) and `cleanup` (the cloud sweep, or the npa home):
each builds its typed request and calls the SDK."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from npa_pulumi.cli.common import output_option, run_guarded, stderr_console
from npa_pulumi.cli.fleet_options import (
    break_lock_option,
    deletion_options,
    destroy_options,
    fleet_fields,
    recipes,
    selection,
    shard_option,
    stage_option,
    teardown,
)
from npa_pulumi.cli.fleet_output import NotConfirmed, approver, finish, nothing_to_do
from npa_pulumi.cli.retry_commands import render_retry
from npa_pulumi.errors import EXIT_FAILED, UserInputError
from npa_pulumi.output.streams import emit_json

if TYPE_CHECKING:
    from npa_pulumi.output.results import FleetResult
    from npa_pulumi.sdk.operations import Approve
    from npa_pulumi.sdk.receipts import LocalCleanupReport


@click.command("destroy")
@destroy_options
@output_option()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="Same as --yes.")
@click.option(
    "--receipt",
    "receipt_ref",
    default=None,
    metavar="ID",
    help="Continue the teardown this receipt records (its id, or its path): its selection, flags and "
    "identity; completed phases stay completed. Without --spec only the guarded phases (bucket, storage "
    "identity, project) run.",
)
@click.option(
    "--project-id",
    "proof_project_id",
    default=None,
    metavar="ID",
    help="With --cluster-id, for one selected cluster the cloud has but no stack records (no recoverable "
    "state): the exact project id it must be in.",
)
@click.option(
    "--cluster-id",
    "proof_cluster_id",
    default=None,
    metavar="ID",
    help="With --project-id: the exact id of that cluster; destroy deletes it by this id once the cloud "
    "shows it in that project under the selected cluster's name (never by a name match alone).",
)
@deletion_options
@shard_option
@stage_option
@break_lock_option
def destroy_command(**kw: Any) -> None:
    """Destroy the selected clusters, then (once no cluster of a project remains) the project stack and
    its owned network; with --shard project stacks are kept for a final unsharded destroy. Buckets,
    storage identities and projects are retained unless asked for, and then deleted only with proof that
    the fleet created them. Every run leaves a receipt; a partial cleanup exits 2 and names the
    `destroy --receipt ID` that continues it."""

    def body() -> int:
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import ClusterProof, DestroyRequest

        approve = approver(kw["yes"] or kw["force"])
        if kw["receipt_ref"]:
            if kw["proof_project_id"] or kw["proof_cluster_id"]:
                raise UserInputError("--project-id/--cluster-id select a cluster of a spec, not of a receipt")
            return finish(_destroy_from_receipt(kw, approve), kw["output"])
        chosen = selection(kw)
        proof = None
        if kw["proof_project_id"] is not None or kw["proof_cluster_id"] is not None:
            proof = ClusterProof(kw["proof_project_id"] or "", kw["proof_cluster_id"] or "")
        request = DestroyRequest(  # checks the deletions asked for, and --break-lock with --shard
            **fleet_fields(kw, chosen),
            teardown=teardown(kw),
            dry_run=kw["dry_run"],
            break_lock=kw["break_lock"],
            cluster_proof=proof,
        )
        if not kw["spec_path"]:
            raise UserInputError("destroy needs --spec (or --receipt ID to continue a recorded teardown)")
        selected = sdk.select(kw["spec_path"], chosen)
        if not selected.targets:
            return nothing_to_do("destroy", selected, request, kw["output"], dry_run=kw["dry_run"])
        return finish(sdk.destroy(selected, request, approve, render_retry), kw["output"])

    run_guarded(body, kw["output"])


def _given(kw: dict[str, Any], name: str) -> Any:
    """A flag's value only when the caller typed it (a default is not an identity to check)."""
    from click.core import ParameterSource

    source = click.get_current_context().get_parameter_source(name)
    return kw[name] if source not in (ParameterSource.DEFAULT, None) else None


def _destroy_from_receipt(kw: dict[str, Any], approve: Approve) -> FleetResult:
    """`destroy --receipt ID`: the identity flags count only where the caller typed them."""
    from npa_pulumi.sdk.receipts import destroy_from_receipt
    from npa_pulumi.sdk.requests import ReceiptDestroyRequest

    def say(message: str) -> None:
        stderr_console.print(message, markup=False, soft_wrap=True)

    request = ReceiptDestroyRequest(
        receipt=kw["receipt_ref"],
        spec_path=kw["spec_path"],
        selection=selection(kw),
        cloud=_given(kw, "cloud"),
        backend=_given(kw, "backend"),
        profile=kw["profile"],
        auth=kw["auth"],
        passphrase_file=kw["passphrase_file"],
        recipes=recipes(kw),
        concurrency=kw["concurrency"],
        show_progress=True,
        teardown=teardown(kw),
        dry_run=kw["dry_run"],
    )
    return destroy_from_receipt(request, approve, say, render_retry)


@click.command("cleanup")
@destroy_options
@output_option()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@deletion_options
@click.option("--list-receipts", is_flag=True, help="Local: list every teardown receipt.")
@click.option(
    "--prune-receipts",
    is_flag=True,
    help="Local: with --receipt-retention-days N and --yes, delete receipts older than N days whose "
    "teardown is fully terminal.",
)
@click.option("--receipt-retention-days", type=click.FloatRange(min=0), default=None)
@click.option(
    "--delete-orphans",
    is_flag=True,
    help="With --spec: delete in the cloud what the fleet created and no stack references (orphan networks; "
    "buckets, storage identities and projects with their opt-in flags). Without it, cleanup --spec only "
    "reports them.",
)
@click.option(
    "--full",
    is_flag=True,
    help="Local: also find failed scratch cleanups (a killed run's private temporary directories) and "
    "caches of earlier layouts (stale plugin wrappers, the original npa tool's Terraform provider cache); "
    "with --yes remove them, each only when provably npa's.",
)
def cleanup_command(**kw: Any) -> None:
    """Without --spec, local only: report what the npa home holds (work dirs, kubeconfigs, logs, caches,
    receipts, stale run records) and what still costs money; --yes removes the residue of stacks that no
    longer exist; --full adds failed scratch cleanups and caches of earlier layouts. cleanup never deletes
    anything in the cloud unless asked explicitly: with --spec it reports what the fleet created (by its
    labels) that no stack references any more; with --spec --delete-orphans it deletes that through the same
    guarded phases as destroy (orphan networks, and buckets, storage identities and projects only with the
    opt-in flags). --dry-run only reports."""

    def body() -> int:
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import CleanupRequest

        if not kw["spec_path"]:
            if kw["delete_orphans"]:
                raise UserInputError("--delete-orphans deletes in the cloud: it needs --spec")
            return _local_cleanup(kw)
        if (
            kw["list_receipts"]
            or kw["prune_receipts"]
            or kw["full"]
            or kw["receipt_retention_days"] is not None
        ):
            raise UserInputError(
                "--list-receipts, --prune-receipts, --receipt-retention-days and --full belong to the local "
                "cleanup: run `npa-pulumi cleanup` without --spec"
            )
        asked = [
            flag
            for flag, key in (
                ("--delete-buckets", "delete_buckets"),
                ("--delete-nonempty-buckets", "delete_nonempty_buckets"),
                ("--delete-storage-identity", "delete_storage_identity"),
                ("--delete-projects", "delete_projects"),
            )
            if kw.get(key)
        ]
        if asked and not kw["delete_orphans"]:
            raise UserInputError(
                f"{', '.join(asked)} delete in the cloud: cleanup does that only with --delete-orphans "
                "(`npa-pulumi cleanup --spec F --delete-orphans ...`)"
            )
        if not kw["delete_orphans"] and not kw["dry_run"]:
            stderr_console.print(
                "cleanup --spec reports what the fleet left in the cloud and deletes nothing there; "
                "to delete it: npa-pulumi cleanup --spec F --delete-orphans --yes",
                markup=False,
                soft_wrap=True,
            )
        chosen = selection(kw)
        request = CleanupRequest(
            **fleet_fields(kw, chosen),
            teardown=teardown(kw),
            dry_run=kw["dry_run"] or not kw["delete_orphans"],
        )
        selected = sdk.select(kw["spec_path"], chosen)
        result = sdk.cleanup(selected, request, approver(kw["yes"]), render_retry)
        return finish(result, kw["output"])

    run_guarded(body, kw["output"])


def _local_cleanup(kw: dict[str, Any]) -> int:
    """`cleanup` without a spec: the npa home only (the SDK's local_cleanup), no cloud."""
    from npa_pulumi.sdk.receipts import local_cleanup
    from npa_pulumi.sdk.requests import LocalCleanupRequest

    cloud_flags = [
        f"--{name.replace('_', '-')}"
        for name in (
            "delete_buckets",
            "delete_nonempty_buckets",
            "delete_storage_identity",
            "delete_projects",
        )
        if kw[name]
    ]
    if cloud_flags:
        raise UserInputError(
            f"{', '.join(cloud_flags)} delete in the cloud: give the fleet's --spec for the cloud sweep "
            "(`npa-pulumi cleanup --spec fleet.yaml ...`); without it cleanup is local only"
        )
    if kw["prune_receipts"] and kw["receipt_retention_days"] is None:
        raise UserInputError(
            "--prune-receipts needs --receipt-retention-days N (receipts younger than N days are kept)"
        )
    applied = bool(kw["yes"]) and not kw["dry_run"]
    prune = kw["prune_receipts"] and not kw["dry_run"]
    if prune and not applied:
        raise NotConfirmed("refusing to prune receipts without --yes; nothing was changed")
    report = local_cleanup(
        LocalCleanupRequest(
            backend=kw["backend"],
            remove=applied,
            prune_after_days=float(kw["receipt_retention_days"]) if prune else None,
            full=kw["full"],
        )
    )
    if kw["output"] == "json":
        emit_json(report.to_json())
    else:
        _print_local_cleanup(report, kw["list_receipts"], applied=applied)
    return EXIT_FAILED if report.errors else 0


def _print_local_cleanup(report: LocalCleanupReport, list_receipts: bool, applied: bool) -> None:
    echo = click.echo
    echo(f"npa home {report.npa_home} (backend {report.backend})")
    for item in report.items:
        mark = "removed" if item.removed else ("residue" if item.removable else item.stack_state)
        echo(f"  {item.kind:<14} {mark:<11} {item.path}  ({item.bytes:,} bytes) — {item.reason}")
    sizes = ", ".join(f"{name} {size:,} bytes" for name, size in report.sizes.items())
    echo(f"  kept: {sizes} (logs, caches and teardown records are audit evidence)")
    for costing in report.still_costing:
        echo(f"  still costing money: {costing['stack']} holds {costing['holds']}: {costing['command']}")
    terminal = sum(1 for r in report.receipts if r.terminal)
    echo(f"  receipts: {len(report.receipts)} ({terminal} fully terminal), {len(report.pruned)} pruned")
    if list_receipts:
        for r in report.receipts:
            state = "pruned" if r.pruned else ("terminal" if r.terminal else "open")
            echo(f"    {r.id}  {r.fleet}  {r.outcome:<16} {state:<8} {r.age_days:g} days  {r.path}")
    if report.verification_unresolved:
        echo(f"  {len(report.verification_unresolved)} item(s) could not be verified (not a file:// backend)")
    left = [i for i in report.items if i.removable and not i.removed]
    if left and not applied:
        full = " --full" if report.scope == "local-full" else ""
        echo(f"  {len(left)} item(s) of residue: `npa-pulumi cleanup{full} --yes` removes them")
    for error in report.errors:
        echo(f"  error: {error}", err=True)


def register(group: click.Group) -> None:
    group.add_command(destroy_command)
    group.add_command(cleanup_command)
