"""`status`, `refresh`, `stacks` and `kubeconfig`: what the fleet is, read (refresh records drift in the
stacks' state); each builds its typed request and calls the SDK."""

from __future__ import annotations

import sys
from typing import Any

import click

from npa_pulumi.cli.common import output_option, run_guarded, stderr_console
from npa_pulumi.cli.cost_commands import prices_option
from npa_pulumi.cli.fleet_options import fleet_fields, fleet_options, selection, shard_option, stage_option
from npa_pulumi.cli.fleet_output import finish, nothing_to_do
from npa_pulumi.errors import NpaError
from npa_pulumi.output.streams import emit_json


@click.command("status")
@fleet_options
@output_option()
@shard_option
@prices_option
@click.option(
    "--no-live",
    "no_live",
    is_flag=True,
    help="Only what each stack recorded (its outputs, run state and last update); the live clusters and "
    "node groups are not read. Fast at any fleet size; says nothing about what changed outside the fleet.",
)
def status_command(**kw: Any) -> None:
    """Stack outputs plus live cloud state per cluster, and what it costs."""

    def body() -> int:
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import StatusRequest

        chosen = selection(kw)
        request = StatusRequest(**fleet_fields(kw, chosen), prices=kw["prices"], live=not kw["no_live"])
        selected = sdk.select(kw["spec_path"], chosen)
        if not selected.targets:
            return nothing_to_do("status", selected, request, kw["output"])
        return finish(sdk.status(selected, request), kw["output"])

    run_guarded(body, kw["output"])


@click.command("refresh")
@fleet_options
@output_option()
@shard_option
@stage_option
def refresh_command(**kw: Any) -> None:
    """Compare every stack with the live cloud and record drift. With --shard only the shard's cluster
    stacks (project stacks are shared: refresh them once with --stage projects)."""

    def body() -> int:
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import RefreshRequest

        chosen = selection(kw)
        request = RefreshRequest(**fleet_fields(kw, chosen))
        selected = sdk.select(kw["spec_path"], chosen)
        if not selected.targets:
            return nothing_to_do("refresh", selected, request, kw["output"])
        return finish(sdk.refresh(selected, request), kw["output"])

    run_guarded(body, kw["output"])


@click.command("stacks")
@click.option("--backend", default=None, metavar="URL")
@click.option("--fleet", "fleet_name", default=None, help="Only this fleet's stacks (by the npa:fleet tag).")
@output_option()
def stacks_command(backend: str | None, fleet_name: str | None, output: str) -> None:
    """List the fleet stacks in the backend (what `pulumi stack ls` shows in this repository)."""

    def body() -> int:
        from npa_pulumi.sdk.operations import list_stacks

        stacks = list_stacks(backend, fleet_name)
        if output == "json":
            emit_json({"stacks": stacks})
        else:
            from npa_pulumi.output.text import print_stack_list

            print_stack_list(stacks)
        return 0

    run_guarded(body, output)


class NothingDeployed(NpaError):
    kind = "not-deployed"


@click.command("kubeconfig")
@fleet_options
@output_option()
@click.option(
    "--merge-into",
    default=None,
    type=click.Path(dir_okay=False),
    metavar="PATH",
    help="Merge the clusters' contexts into this kubeconfig (e.g. ~/.kube/config) instead of printing them.",
)
def kubeconfig_command(**kw: Any) -> None:
    """Print (or merge) kubeconfigs for the selected, deployed clusters: one context per cluster,
    `fleet-<fleet>-<project>-<cluster>`, with fresh credentials (Nebius: the nebius CLI as an exec plugin
    pinned to the profile; local cloud: a client certificate)."""

    def body() -> int:
        from pathlib import Path

        from npa_pulumi.kube import kubeconfig as kc
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import FleetRequest

        chosen = selection(kw)
        entries = sdk.kubeconfigs(
            sdk.select(kw["spec_path"], chosen), FleetRequest(**fleet_fields(kw, chosen))
        )
        deployed = [e for e in entries if e.get("kubeconfig")]
        for entry in entries:
            if not entry.get("kubeconfig"):
                stderr_console.print(f"{entry['stack']}: not deployed, no kubeconfig", markup=False)
        if not deployed:
            raise NothingDeployed("none of the selected clusters is deployed: run `npa-pulumi up` first")
        merged: dict[str, Any] = {}
        for entry in deployed:
            merged = kc.merge(merged, kc.load(entry["kubeconfig"]))
        listing = [{k: v for k, v in e.items() if k != "kubeconfig"} for e in entries]
        if kw["merge_into"]:
            path = Path(kw["merge_into"]).expanduser()
            existing = kc.load(path.read_text()) if path.exists() else {}
            kc.write_private(path, kc.dump(kc.merge(existing, merged)))
            stderr_console.print(f"merged {len(deployed)} context(s) into {path}", markup=False)
            if kw["output"] == "json":
                emit_json({"clusters": listing, "merged_into": str(path)})
            return 0
        if kw["output"] == "json":
            emit_json({"clusters": listing, "kubeconfig": merged})
        else:
            sys.stdout.write(kc.dump(merged))
        return 0

    run_guarded(body, kw["output"])


def register(group: click.Group) -> None:
    group.add_command(status_command)
    group.add_command(refresh_command)
    group.add_command(stacks_command)
    group.add_command(kubeconfig_command)
