"""`npa-pulumi local-cloud …`: set up, inspect and perturb the embedded local Nebius cloud.

    local-cloud init [--tenant-fixture F] [--force]    seed it (the default fixture unless F)
    local-cloud show [--output json]                   everything in it, with quota/capacity usage
    local-cloud reset [--yes]                          forget everything (re-seeded on next use)
    local-cloud s3 start|stop|status [--port N]        its S3 endpoint (the buckets over S3's API)
    local-cloud fault add|list|clear                   fail or slow the next N calls of an operation
    local-cloud fault node|slurm|driver|api            break a node, a Slurm role, the GPU driver, an API
    local-cloud maintenance add|finish --cluster C --node N [--reason CODE]
                                                       a maintenance event on a node's instance
    local-cloud add instance|disk|registry|group|security-group --project P --name N
                                                       put into a project what a user could (for tests)
    local-cloud set provisioning-seconds|wait-timeout-seconds N
    local-cloud settings [--output json]
    local-cloud api OPERATION [--args JSON]            the machine-facing API (see npa_pulumi.simulator.api)

The location is `--dir`, else `$NPA_LOCAL_CLOUD_DIR`, else `~/.npa-pulumi/local-cloud/`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from npa_pulumi.cli.common import output_option
from npa_pulumi.errors import NpaError
from npa_pulumi.output.streams import emit_json
from npa_pulumi.simulator import db
from npa_pulumi.simulator_cli.common import guard, say, simulator_of
from npa_pulumi.simulator_cli.fault_commands import fault_group, maintenance_group
from npa_pulumi.simulator_cli.inventory import print_inventory

SETTING_NAMES = {
    "provisioning-seconds": "provisioning_seconds",
    "wait-timeout-seconds": "wait_timeout_seconds",
    "project-default-network": "project_default_network",
    "delete-lag-seconds": "delete_lag_seconds",
    "kubernetes-api": "kubernetes_api",
}


@click.group("local-cloud")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=db.ENV_DIR,
    default=None,
    help=f"Local cloud directory [env {db.ENV_DIR}; default ~/.npa-pulumi/local-cloud].",
)
@click.pass_context
def local_cloud(ctx: click.Context, directory: Path | None) -> None:
    """The embedded local Nebius cloud (SQLite) used by --cloud local, demos and tests."""
    ctx.ensure_object(dict)
    ctx.obj["dir"] = directory


@local_cloud.command("init")
@click.option(
    "--tenant-fixture",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Tenant fixture YAML to seed from (default: the shipped local-tenant.yaml).",
)
@click.option("--force", is_flag=True, help="Re-seed even if already initialised (deletes everything in it).")
@output_option()
@click.pass_context
def init_cmd(ctx: click.Context, tenant_fixture: Path | None, force: bool, output: str) -> None:
    """Seed the local cloud from a tenant fixture."""

    def body() -> int:
        result = simulator_of(ctx).initialise(tenant_fixture, force=force)
        if result["status"] == "conflict":
            raise NpaError(
                f"the local cloud at {result['directory']} was seeded from a different fixture; "
                "pass --force to re-seed it (this deletes everything in it), or `local-cloud reset`"
            )
        if output == "json":
            emit_json({"ok": True, **result})
        elif result["status"] == "unchanged":
            say(f"local cloud at {result['directory']} is already initialised from this fixture")
        else:
            say(
                f"initialised local cloud at {result['directory']} (tenant {result['tenant_id']}) "
                f"from {result['fixture']}"
            )
        return 0

    guard(body, output)


@local_cloud.command("show")
@output_option()
@click.pass_context
def show_cmd(ctx: click.Context, output: str) -> None:
    """Everything in the local cloud, with current quota and capacity-block usage."""

    def body() -> int:
        simulator = simulator_of(ctx)
        inventory = simulator.inventory()
        if output == "json":
            emit_json(inventory)
        else:
            print_inventory(simulator, inventory)
        return 0

    guard(body, output)


@local_cloud.command("reset")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def reset_cmd(ctx: click.Context, yes: bool) -> None:
    """Delete everything in the local cloud; the next use re-seeds it from the default fixture."""

    def body() -> int:
        simulator = simulator_of(ctx, auto_init=False)
        if not yes and not click.confirm(f"Delete everything in the local cloud at {simulator.directory}?"):
            say("Aborted.")
            return 1
        simulator.reset()
        say(f"local cloud at {simulator.directory} reset")
        return 0

    guard(body)


@local_cloud.group("s3")
def s3_group() -> None:
    """The local cloud's S3 endpoint: a SeaweedFS server (`weed server -s3`) on 127.0.0.1 serving its buckets,
    for an s3:// backend."""


def _s3_report(ctx: click.Context, output: str, verb: str) -> None:
    from npa_pulumi.simulator import seaweedd

    state = seaweedd.status(simulator_of(ctx, auto_init=False).directory)
    if output == "json":
        emit_json({"ok": True, **state.to_json()})
    elif state.running:
        say(f"S3 server (SeaweedFS) {verb}: {state.endpoint} (pid {state.pid}; log {state.log})")
    else:
        where = f" (its port stays {state.port})" if state.port else ""
        say(f"S3 server {verb}{where}")


@s3_group.command("start")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=None, help="Listen here (recorded from then on)."
)
@output_option()
@click.pass_context
def s3_start_cmd(ctx: click.Context, port: int | None, output: str) -> None:
    """Start the S3 server (nothing to do when it runs); prints its endpoint."""

    def body() -> int:
        from npa_pulumi.simulator import seaweedd

        simulator = simulator_of(ctx)
        simulator.principal()  # seeds the cloud on first use, as every other command does
        seaweedd.ensure_running(simulator.directory, port=port)
        _s3_report(ctx, output, "running")
        return 0

    guard(body, output)


@s3_group.command("stop")
@output_option()
@click.pass_context
def s3_stop_cmd(ctx: click.Context, output: str) -> None:
    """Stop the S3 server (a command whose backend is in the local cloud starts it again)."""

    def body() -> int:
        from npa_pulumi.simulator import seaweedd

        stopped = seaweedd.stop(simulator_of(ctx, auto_init=False).directory)
        _s3_report(ctx, output, "stopped" if stopped else "not running")
        return 0

    guard(body, output)


@s3_group.command("status")
@output_option()
@click.pass_context
def s3_status_cmd(ctx: click.Context, output: str) -> None:
    """Whether the S3 server runs, its endpoint and pid."""

    def body() -> int:
        from npa_pulumi.simulator import seaweedd

        running = seaweedd.is_running(simulator_of(ctx, auto_init=False).directory)
        _s3_report(ctx, output, "running" if running else "not running")
        return 0

    guard(body, output)


# `local-cloud add KIND`: the simulator's create operation of each kind a user can put into a project.
ADDABLE = {
    "instance": "create_instance",
    "disk": "create_disk",
    "registry": "create_registry",
    "group": "create_group",
    "security-group": "create_security_group",
}


@local_cloud.command("add")
@click.argument("kind", type=click.Choice(sorted(ADDABLE)))
@click.option("--project", "project_id", required=True, help="The project id to put it in.")
@click.option("--name", required=True, help="Its name (unique in the project per kind).")
@click.option("--network", "network_id", default=None, help="security-group: the network it belongs to.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="A label (repeatable).")
@output_option()
@click.pass_context
def add_cmd(
    ctx: click.Context,
    kind: str,
    project_id: str,
    name: str,
    network_id: str | None,
    labels: tuple[str, ...],
    output: str,
) -> None:
    """Put a VM, a disk, a container registry, an IAM group or a security group into a project, as a user
    could outside the fleet (a teardown must then refuse to delete the project, naming it)."""

    def body() -> int:
        parsed: dict[str, str] = {}
        for label in labels:
            key, sep, value = label.partition("=")
            if not sep or not key:
                raise ValueError(f"--label {label!r}: expected KEY=VALUE")
            parsed[key] = value
        args: dict[str, Any] = {"project_id": project_id, "name": name, "labels": parsed}
        if kind == "security-group":
            if not network_id:
                raise ValueError("a security group needs --network (the network it belongs to)")
            args["network_id"] = network_id
        elif network_id:
            raise ValueError(f"--network applies to a security group, not to a {kind}")
        record = getattr(simulator_of(ctx), ADDABLE[kind])(**args)
        if output == "json":
            emit_json({"ok": True, "kind": kind, "result": record})
        else:
            say(f"added {kind} {record['id']} ({record['name']}) to project {project_id}")
        return 0

    guard(body, output)


@local_cloud.command("set")
@click.argument("name", type=click.Choice(sorted(SETTING_NAMES)))
@click.argument("value", type=click.FloatRange(min=0))
@click.pass_context
def set_cmd(ctx: click.Context, name: str, value: float) -> None:
    """Change a setting: provisioning-seconds (how long new clusters and node groups stay PROVISIONING),
    wait-timeout-seconds (how long a create by the local Terraform providers or soperator's stand-in waits
    for RUNNING) or project-default-network (1: a new project comes with a `default-network`, a
    `default-subnet-*` and the network's default security group, as on Nebius; 0: empty), delete-lag-seconds
    or kubernetes-api (1: a real Kubernetes API server behind every cluster; 0: none, for work that never
    looks inside a cluster; $NPA_LOCAL_CLOUD_KUBERNETES_API overrides it)."""

    def body() -> int:
        simulator_of(ctx).set_setting(SETTING_NAMES[name], value)
        say(f"{name} = {value:g}")
        return 0

    guard(body)


@local_cloud.command("settings")
@output_option()
@click.pass_context
def settings_cmd(ctx: click.Context, output: str) -> None:
    """The tenant, regions and settings of the local cloud."""

    def body() -> int:
        settings = simulator_of(ctx).settings()
        if output == "json":
            emit_json(settings)
        else:
            for key, value in settings.items():
                click.echo(f"{key}: {value}")
        return 0

    guard(body, output)


@local_cloud.command(
    "api",
    context_settings={
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
        "help_option_names": [],
    },
    add_help_option=False,
)
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def api_cmd(ctx: click.Context, arguments: tuple[str, ...]) -> None:
    """Machine-facing API: OPERATION [--args JSON | --args-env VAR]; prints one JSON document.
    (soperator's stand-in recipe calls `python -m npa_pulumi.simulator.api` directly, which starts faster.)"""
    from npa_pulumi.simulator import api

    directory: Path | None = ctx.obj.get("dir") if ctx.obj else None
    if directory is not None:
        import os

        os.environ[db.ENV_DIR] = str(directory)
    sys.exit(api.main(list(arguments)))


local_cloud.add_command(fault_group)
local_cloud.add_command(maintenance_group)


def register(group: click.Group) -> None:
    group.add_command(local_cloud)
