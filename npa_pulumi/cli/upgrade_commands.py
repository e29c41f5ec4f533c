"""`npa-pulumi upgrade plan`: the offline Kubernetes upgrade plan of a fleet (plan/upgrade.py); it calls no
cloud and reads no backend. `npa-pulumi upgrade run`: that plan executed as a train of `up`s, two per hop
(the control planes, then the unpinned node groups), the skew read back and checked after each
(sdk/upgrade.py; docs/upgrades.md)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from npa_pulumi.cli.common import output_option, run_guarded
from npa_pulumi.cli.fleet_options import fleet_fields, fleet_options, rollout, selection
from npa_pulumi.cli.rollout_options import ignore_maintenance_option, rollout_options
from npa_pulumi.errors import EXIT_FAILED, UserInputError


@click.group("upgrade")
def upgrade_group() -> None:
    """Kubernetes version upgrades of the fleet: one minor at a time, control plane first, skew checked."""


@upgrade_group.command("plan")
@click.option("--spec", "-f", "spec_path", type=click.Path(path_type=Path), help="The fleet spec file.")
@click.option(
    "--to",
    "target",
    default=None,
    metavar="1.NN",
    help="Plan every cluster from the version its spec declares to this one.",
)
@click.option(
    "--from",
    "previous_path",
    type=click.Path(path_type=Path),
    default=None,
    help="The spec as it was (e.g. `git show main:fleet.yaml > old.yaml`): plan each cluster from the "
    "version it declared there to the one --spec declares.",
)
@click.option(
    "--at",
    "at_text",
    default=None,
    metavar="ISO-TIME",
    help="Judge windows and exclusions at this time (with an offset; default: now).",
)
@output_option("text", "json", "markdown")
def plan_command(
    spec_path: Path | None, target: str | None, previous_path: Path | None, at_text: str | None, output: str
) -> None:
    """Plan the fleet's Kubernetes upgrade offline: per cluster the hops, their phases, the refusals and
    the GPU-hours drained. Exit 1 when a cluster's upgrade is refused, 2 on invalid input."""
    from npa_pulumi.cli.spec_commands import _guarded

    def body() -> int:
        from npa_pulumi.output.streams import emit_json
        from npa_pulumi.output.upgrade import render_upgrade_text, upgrade_markdown
        from npa_pulumi.plan.upgrade import parse_minor, upgrade_plan
        from npa_pulumi.spec.parse import load_spec

        if spec_path is None:
            raise UserInputError("--spec is required (the fleet spec file)")
        if (target is None) == (previous_path is None):
            raise UserInputError(
                "give --to VERSION (plan from the spec's versions) or --from OLD_SPEC (plan from the "
                "versions it declared to the spec's)"
            )
        if target is not None and parse_minor(target) is None:
            raise UserInputError(f"--to {target!r} is not a Kubernetes minor version (e.g. 1.33)")
        at = _moment(at_text)
        spec = load_spec(spec_path)
        previous = load_spec(previous_path) if previous_path is not None else None
        document = upgrade_plan(spec, at=at, target=target, previous=previous).to_dict()
        if output == "json":
            emit_json(document)
        elif output == "markdown":
            sys.stdout.write(upgrade_markdown(document))
        else:
            sys.stdout.write(render_upgrade_text(document))
        return 0 if document["ok"] else EXIT_FAILED

    _guarded(body, output)


def force_option(func: Any) -> Any:
    """`--force`: a disruptive change goes without waiting for `maintenance.wait_for_jobs`' jobs."""
    option = click.option(
        "--force",
        is_flag=True,
        help="Apply disruptive changes without waiting for the jobs of maintenance.wait_for_jobs (its job "
        "pods; a soperator cluster's Slurm jobs: its workers are not drained).",
    )
    return option(func)


@upgrade_group.command("run")
@fleet_options
@output_option()
@click.option(
    "--to",
    "target",
    default=None,
    metavar="1.NN",
    help="The Kubernetes minor to reach (default: each cluster's k8s_version in the spec).",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--health-gate/--no-health-gate",
    default=True,
    show_default=True,
    help="Each hop's clusters pass the GPU health gate before the next hop (as `up`).",
)
@rollout_options
@ignore_maintenance_option
@force_option
def run_command(**kw: Any) -> None:
    """Upgrade the fleet's Kubernetes: per minor hop an `up` of the control planes, then one of the unpinned
    node groups (the spec's rollout waves and gates, its maintenance windows), the skew checked after each.
    Exit 1 when refused or halted, 2 on invalid input."""

    def body() -> int:
        from npa_pulumi.cli.fleet_output import approver
        from npa_pulumi.output.streams import emit_json
        from npa_pulumi.output.upgrade import render_run_text
        from npa_pulumi.plan.upgrade import parse_minor
        from npa_pulumi.sdk import upgrade as train
        from npa_pulumi.sdk.requests import UpRequest

        target = kw["target"]
        if target is not None and parse_minor(target) is None:
            raise UserInputError(f"--to {target!r} is not a Kubernetes minor version (e.g. 1.33)")
        chosen = selection(kw)
        request = UpRequest(
            **fleet_fields(kw, chosen),
            preflight=False,  # each hop changes versions only: no new capacity to check
            rollout=rollout(kw),
            health_gate=kw["health_gate"],
            force=kw["force"],
        )
        run = train.upgrade(kw["spec_path"], target, request, approve=approver(kw["yes"]))
        document = run.to_dict()
        if kw["output"] == "json":
            emit_json(document)
        else:
            sys.stdout.write(render_run_text(document))
        return 0 if run.ok else EXIT_FAILED

    run_guarded(body, kw["output"])


def _moment(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise UserInputError(f"--at {text!r} is not an ISO time with an offset (e.g. 2026-12-12T03:00+01:00)")
    return moment


def register(group: click.Group) -> None:
    group.add_command(upgrade_group)
