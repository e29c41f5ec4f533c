"""What the fleet commands share after the SDK answers: the result on stdout and its exit code, the empty
selection, and asking a person before a change (the SDK's `approve`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from npa_pulumi.cli.common import stderr_console
from npa_pulumi.cli.observability import finished
from npa_pulumi.errors import EXIT_FAILED, EXIT_PARTIAL_CLEANUP, NpaError
from npa_pulumi.output.streams import emit_json

if TYPE_CHECKING:
    from npa_pulumi.output.results import FleetResult, TeardownPhase
    from npa_pulumi.plan import Target
    from npa_pulumi.sdk.operations import Approval, Approve, Selected
    from npa_pulumi.sdk.requests import FleetRequest
    from npa_pulumi.spec import FleetSpec


def finish(result: FleetResult, output: str) -> int:
    """Print the result (one JSON document with --output json) and return the command's exit code."""
    from npa_pulumi.output.text import print_fleet_result

    finished(result)  # what --notify and --trace report when the command ends (cli/observability.py)
    if output == "json":
        emit_json(result.to_json())
    else:
        print_fleet_result(result)
    if result.partial_cleanup:
        return EXIT_PARTIAL_CLEANUP  # not success, and not "the command failed": something is left
    return EXIT_FAILED if result.failed_count else 0


def nothing_to_do(
    command: str, selected: Selected, request: FleetRequest, output: str, dry_run: bool = False
) -> int:
    """An empty selection (a shard that owns no cluster): still one JSON document with --output json."""
    shard = selected.selection.shard
    stderr_console.print("nothing to do" + (f" (shard {shard} owns no cluster)" if shard else ""))
    if output == "json":
        from npa_pulumi.sdk.operations import empty_result

        emit_json(empty_result(command, selected, request, dry_run).to_json())
    return 0


class NotConfirmed(NpaError):
    """A mutating command that was not confirmed: nothing was done (exit 1, not 2: the input was valid)."""

    kind = "not-confirmed"


def confirm(banner: list[str], yes: bool, action: str) -> None:
    """Destructive or mutating commands ask first; without a terminal they refuse unless --yes."""
    for line in banner:
        stderr_console.print(line, markup=False, soft_wrap=True)
    if yes:
        return
    if not sys.stdin.isatty():
        raise NotConfirmed(
            f"refusing to {action} without --yes: this session is not interactive; nothing was changed"
        )
    if not click.confirm(f"Proceed to {action}?", default=False, err=True):
        raise NotConfirmed(f"aborted: did not {action}; nothing was changed")


def approver(yes: bool) -> Approve:
    """The SDK's `approve` for a command: show what is about to change, then ask (or --yes)."""

    def approve(approval: Approval) -> None:
        confirm(banner_of(approval), yes, approval.action)

    return approve


def banner_of(approval: Approval) -> list[str]:
    """What a person is shown before a change: the clusters, and the phases a teardown will run."""
    phases = phase_lines(approval.phases)
    if approval.action == "clean up":
        return [f"About to CLEAN UP fleet '{approval.fleet}': delete what no stack references.", *phases]
    if approval.spec is None:  # a receipt's guarded phases
        return [
            f"About to CONTINUE the teardown of fleet '{approval.fleet}' from receipt {approval.receipt_id}.",
            *phases,
        ]
    if approval.action == "deploy":
        return banner("create/update", approval.spec, approval.targets)
    if approval.action == "adopt":  # stacks are created; nothing in the cloud changes
        return banner("adopt (take over, without a change in the cloud)", approval.spec, approval.targets)
    continuing = [f"Continuing the teardown of receipt {approval.receipt_id}."] if approval.receipt_id else []
    return [*banner("DESTROY", approval.spec, approval.targets), *continuing, *phases]


def banner(verb: str, spec: FleetSpec, targets: list[Target]) -> list[str]:
    projects = sorted({t.project_key for t in targets})
    lines = [
        f"About to {verb} fleet '{spec.name}': {len(targets)} cluster(s) across {len(projects)} project(s)."
    ]
    for target in targets:
        where = target.project_id or f"{target.display_name} (created if missing)"
        lines.append(
            f"  - {target.cluster_stack}  [{target.backend}] project {where}, "
            f"region {target.region or '(from the profile)'}"
        )
    return lines


def phase_lines(phases: list[TeardownPhase]) -> list[str]:
    lines = ["Phases, in order:"]
    for phase in phases:
        what = phase.deletes if phase.status == "planned" else phase.retains
        detail = f" {what}" if what else ""
        reason = f" ({phase.reason})" if phase.reason else ""
        verb = "delete" if phase.status == "planned" else phase.status
        lines.append(f"  {phase.name}: {verb}{detail}{reason}")
        if phase.drain is not None:
            from npa_pulumi.output.results import drain_lines

            lines += [f"    {line}" for line in drain_lines(phase.name, phase.drain)]
    return lines
