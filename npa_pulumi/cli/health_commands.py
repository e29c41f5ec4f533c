"""`health`: the selected clusters' nodes and their projects' maintenance as Nebius and Kubernetes report
them now (read-only), or, with `--requalify`, the gate's per-node probes on the nodes that joined after the
last gate pass. Builds its typed request and calls the SDK."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from npa_pulumi.cli.common import EXIT_FAILED, output_option, run_guarded
from npa_pulumi.cli.fleet_options import fleet_fields, fleet_options, selection, shard_option
from npa_pulumi.cli.observability import health_notifier
from npa_pulumi.errors import UserInputError


def duration_seconds(text: str) -> float:
    """`90`, `90s`, `5m`, `1h` (also `1.5m`) in seconds; anything else is bad input."""
    from npa_pulumi.spec.durations import EXAMPLES
    from npa_pulumi.spec.durations import duration_seconds as parse

    seconds = parse(text)
    if seconds is None:
        raise UserInputError(f"--interval {text!r}: {EXAMPLES}")
    return seconds


class HealthGroup(click.Group):
    """`health` reads the fleet; `health breaker ...` manages the repair ladder's breakers with options of
    its own: a subcommand's arguments skip the read's (its required --spec among them)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] in self.commands:
            ctx.meta[_SUBCOMMAND] = list(args)
            return []
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        args = ctx.meta.get(_SUBCOMMAND)
        if not args:
            return click.Command.invoke(self, ctx)
        command = self.commands[args[0]]
        with ctx:
            sub = command.make_context(args[0], args[1:], parent=ctx)
            with sub:
                return command.invoke(sub)


_SUBCOMMAND = "npa.health.subcommand"


@click.group("health", cls=HealthGroup, invoke_without_command=True)
@fleet_options
@shard_option
@output_option()
@click.option(
    "--min-usable",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.0, 1.0),
    help="Exit 1 when a selected cluster has fewer usable GPUs than this fraction of those it requests.",
)
@click.option(
    "--requalify",
    is_flag=True,
    help="Run the health gate's per-node probes on exactly the unqualified nodes (those that joined after "
    "the last gate pass), refused on a node while pods hold its GPUs; the result is recorded.",
)
@click.option(
    "--yes", "-y", is_flag=True, help="Do not ask before --requalify or --watch --remediate acts on nodes."
)
@click.option(
    "--timeout-minutes",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="--requalify's deadline per cluster.",
)
@click.option(
    "--watch", is_flag=True, help="Read again every --interval (metrics, events) until --iterations."
)
@click.option(
    "--interval", default="60s", show_default=True, help="--watch: time between reads (90, 90s, 5m, 1h)."
)
@click.option("--iterations", type=click.IntRange(min=1), default=None, help="--watch: stop after N reads.")
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="--watch: serve Prometheus metrics on 127.0.0.1:PORT/metrics.",
)
@click.option(
    "--events",
    "events_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="--watch: append transitions (node degraded, recovered, replaced, requalified; maintenance "
    "scheduled, finished) to FILE as JSON lines.",
)
@click.option(
    "--remediate",
    is_flag=True,
    help="The repair ladder (the spec's `remediation`) on each node with an open incident: with --watch "
    "(and --yes) it cordons and requalifies, audited and receipted; with --dry-run it only shows the plan.",
)
@click.option(
    "--dry-run", is_flag=True, help="--remediate: show what the ladder would do now; change nothing."
)
def health_command(**kw: Any) -> None:
    """Each selected cluster's nodes through its registered kubeconfig (Ready, NebiusGPUError,
    NebiusMaintenanceScheduled, NebiusBootDiskIOError, cordon and taints, GPUs against the preset,
    unqualified nodes) and each project's active maintenance events, with GPUs requested, usable, degraded
    and under maintenance per cluster, project and fleet; the repair ladder's breakers, incidents, MTBI,
    MTTR and repeat offenders. Read-only unless --requalify or --watch --remediate."""

    def body() -> int:
        from npa_pulumi.output.health import FleetHealth, render_text
        from npa_pulumi.output.streams import emit_json
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import HealthRequest, HealthWatch

        if kw["dry_run"] and not kw["remediate"]:
            raise UserInputError("--dry-run goes with --remediate")
        if kw["remediate"] and kw["dry_run"] and kw["watch"]:
            raise UserInputError("--remediate --dry-run reads once: it cannot be combined with --watch")
        if kw["remediate"] and not kw["dry_run"]:
            if not kw["watch"]:
                raise UserInputError(
                    "--remediate acts from --watch (`health --watch --remediate --yes`); "
                    "`health --remediate --dry-run` shows what it would do now"
                )
            if not kw["yes"]:
                if not sys.stdin.isatty():
                    raise UserInputError("--watch --remediate cordons and probes nodes: add --yes")
                click.confirm("Let the repair ladder cordon and requalify nodes?", abort=True, err=True)
        if kw["requalify"] and not kw["yes"]:
            if not sys.stdin.isatty():
                raise UserInputError("--requalify creates probe pods on the unqualified nodes: add --yes")
            click.confirm("Run the gate's probes on every unqualified node?", abort=True, err=True)
        watching = kw["watch"] or any(
            kw[k] is not None for k in ("iterations", "metrics_port", "events_path")
        )
        if watching and not kw["watch"]:
            raise UserInputError("--iterations, --metrics-port and --events go with --watch")
        watch = None
        if kw["watch"]:
            watch = HealthWatch(
                interval_s=duration_seconds(kw["interval"]),
                iterations=kw["iterations"],
                metrics_port=kw["metrics_port"],
                events_path=Path(kw["events_path"]) if kw["events_path"] else None,
            )
        request = HealthRequest(
            **fleet_fields(kw, selection(kw)),
            min_usable=kw["min_usable"],
            requalify=kw["requalify"],
            timeout_s=kw["timeout_minutes"] * 60,
            watch=watch,
            remediate=kw["remediate"],
        )
        text = kw["output"] != "json"
        notify = health_notifier()  # --notify and the spec's notify: degraded clusters, then changes

        def on_report(report: FleetHealth) -> None:
            if text:
                click.echo(render_text(report))
            if notify is not None:
                notify(report)

        report = sdk.health(kw["spec_path"], request, on_report)
        if not text:
            emit_json(report.to_json())  # with --watch: the last read (one JSON document on stdout)
        return EXIT_FAILED if report.failed_count else 0

    run_guarded(body, kw["output"])


@health_command.group("breaker")
def breaker_group() -> None:
    """The repair ladder's circuit breakers (per cluster, capacity block group and fleet)."""


@breaker_group.command("reset")
@fleet_options
@shard_option
@output_option()
@click.option(
    "--scope",
    required=True,
    help="The open breaker to close, as `health` shows it: fleet, cluster:PROJECT/CLUSTER or "
    "capacity-block:ID (masked).",
)
def breaker_reset_command(**kw: Any) -> None:
    """Close an open breaker so that the ladder acts in its scope again. Refused when you are the identity
    that watched when it tripped: a person other than the watcher closes it. Audited."""

    def body() -> int:
        from npa_pulumi.output.streams import emit_json
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import FleetRequest

        done = sdk.reset_breaker(
            kw["spec_path"], kw["scope"], FleetRequest(**fleet_fields(kw, selection(kw)))
        )
        if kw["output"] == "json":
            emit_json(done)
        else:
            click.echo(
                f"breaker {kw['scope']} closed by {done['by']} (tripped by {done['breaker_opened_by']})"
            )
            for warning in done["warnings"]:
                click.echo(f"warning: {warning}", err=True)
        return 0

    run_guarded(body, kw["output"])


def register(group: click.Group) -> None:
    group.add_command(health_command)
