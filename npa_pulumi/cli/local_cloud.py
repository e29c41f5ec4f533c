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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from npa_pulumi.cli.common import output_option, run_guarded, stderr_console
from npa_pulumi.cloud.errors import ERROR_KINDS, CloudError
from npa_pulumi.errors import NpaError, UserInputError
from npa_pulumi.output.streams import emit_json
from npa_pulumi.simulator import db
from npa_pulumi.simulator.simulator import OPERATIONS, LocalSimulator

SETTING_NAMES = {
    "provisioning-seconds": "provisioning_seconds",
    "wait-timeout-seconds": "wait_timeout_seconds",
    "project-default-network": "project_default_network",
    "delete-lag-seconds": "delete_lag_seconds",
}


class LocalCloudCommandError(NpaError):
    """A cloud-side refusal surfaced by a local-cloud command."""

    kind = "local-cloud-error"

    def __init__(self, err: CloudError) -> None:
        super().__init__(str(err))
        self.cloud_error = err

    def to_dict(self) -> dict[str, Any]:
        return self.cloud_error.to_dict()


def _simulator(ctx: click.Context, *, auto_init: bool = True) -> LocalSimulator:
    directory: Path | None = ctx.obj.get("dir") if ctx.obj else None
    return LocalSimulator(directory, auto_init=auto_init)


def _guard(body: Callable[[], int | None], output: str = "text") -> None:
    """run_guarded, with cloud errors and bad values turned into the CLI's exit codes."""

    def wrapped() -> int | None:
        try:
            return body()
        except CloudError as err:
            raise LocalCloudCommandError(err) from None
        except ValueError as err:
            raise UserInputError(str(err)) from None

    run_guarded(wrapped, output)


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
        result = _simulator(ctx).initialise(tenant_fixture, force=force)
        if result["status"] == "conflict":
            raise NpaError(
                f"the local cloud at {result['directory']} was seeded from a different fixture; "
                "pass --force to re-seed it (this deletes everything in it), or `local-cloud reset`"
            )
        if output == "json":
            emit_json({"ok": True, **result})
        elif result["status"] == "unchanged":
            _say(f"local cloud at {result['directory']} is already initialised from this fixture")
        else:
            _say(
                f"initialised local cloud at {result['directory']} (tenant {result['tenant_id']}) "
                f"from {result['fixture']}"
            )
        return 0

    _guard(body, output)


@local_cloud.command("show")
@output_option()
@click.pass_context
def show_cmd(ctx: click.Context, output: str) -> None:
    """Everything in the local cloud, with current quota and capacity-block usage."""

    def body() -> int:
        simulator = _simulator(ctx)
        inventory = simulator.inventory()
        if output == "json":
            emit_json(inventory)
        else:
            _print_inventory(simulator, inventory)
        return 0

    _guard(body, output)


@local_cloud.command("reset")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def reset_cmd(ctx: click.Context, yes: bool) -> None:
    """Delete everything in the local cloud; the next use re-seeds it from the default fixture."""

    def body() -> int:
        simulator = _simulator(ctx, auto_init=False)
        if not yes and not click.confirm(f"Delete everything in the local cloud at {simulator.directory}?"):
            _say("Aborted.")
            return 1
        simulator.reset()
        _say(f"local cloud at {simulator.directory} reset")
        return 0

    _guard(body)


@local_cloud.group("s3")
def s3_group() -> None:
    """The local cloud's S3 endpoint (its buckets over S3's API on 127.0.0.1, for an s3:// backend)."""


def _s3_report(ctx: click.Context, output: str, verb: str) -> None:
    from npa_pulumi.simulator import s3daemon

    state = s3daemon.status(_simulator(ctx, auto_init=False).directory)
    if output == "json":
        emit_json({"ok": True, **state.to_json()})
    elif state.running:
        _say(f"S3 server {verb}: {state.endpoint} (pid {state.pid}; log {state.log})")
    else:
        where = f" (its port stays {state.port})" if state.port else ""
        _say(f"S3 server {verb}{where}")


@s3_group.command("start")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=None, help="Listen here (recorded from then on)."
)
@output_option()
@click.pass_context
def s3_start_cmd(ctx: click.Context, port: int | None, output: str) -> None:
    """Start the S3 server (nothing to do when it runs); prints its endpoint."""

    def body() -> int:
        from npa_pulumi.simulator import s3daemon

        simulator = _simulator(ctx)
        simulator.principal()  # seeds the cloud on first use, as every other command does
        s3daemon.ensure_running(simulator.directory, port=port)
        _s3_report(ctx, output, "running")
        return 0

    _guard(body, output)


@s3_group.command("stop")
@output_option()
@click.pass_context
def s3_stop_cmd(ctx: click.Context, output: str) -> None:
    """Stop the S3 server (a command whose backend is in the local cloud starts it again)."""

    def body() -> int:
        from npa_pulumi.simulator import s3daemon

        stopped = s3daemon.stop(_simulator(ctx, auto_init=False).directory)
        _s3_report(ctx, output, "stopped" if stopped else "not running")
        return 0

    _guard(body, output)


@s3_group.command("status")
@output_option()
@click.pass_context
def s3_status_cmd(ctx: click.Context, output: str) -> None:
    """Whether the S3 server runs, its endpoint and pid."""

    def body() -> int:
        from npa_pulumi.simulator import s3daemon

        running = s3daemon.is_running(_simulator(ctx, auto_init=False).directory)
        _s3_report(ctx, output, "running" if running else "not running")
        return 0

    _guard(body, output)


@local_cloud.group("fault")
def fault_group() -> None:
    """Fault injection: fail or slow down the next calls of an operation (works across processes)."""


@fault_group.command("add")
@click.option("--op", required=True, help="Operation name (e.g. create_project), or '*' for every operation.")
@click.option(
    "--error", "error_kind", type=click.Choice(sorted(ERROR_KINDS)), default=None, help="Error to raise."
)
@click.option(
    "--count", type=click.IntRange(min=1), default=1, show_default=True, help="How many calls it hits."
)
@click.option("--forever", is_flag=True, help="Stay armed until `fault clear` (ignores --count).")
@click.option(
    "--latency-ms", type=click.IntRange(min=0), default=0, show_default=True, help="Delay before the call."
)
@click.option("--message", default="", help="Error message (default: a generic one naming the operation).")
@output_option()
@click.pass_context
def fault_add_cmd(
    ctx: click.Context,
    op: str,
    error_kind: str | None,
    count: int,
    forever: bool,
    latency_ms: int,
    message: str,
    output: str,
) -> None:
    """Arm a fault, e.g. `fault add --op create_project --error unavailable --count 2`."""

    def body() -> int:
        if op != "*" and op not in OPERATIONS:
            raise UserInputError(f"unknown operation {op!r}; one of: {', '.join(OPERATIONS)}, or '*'")
        fault = _simulator(ctx).add_fault(
            op, error_kind, count=None if forever else count, latency_ms=latency_ms, message=message
        )
        if output == "json":
            emit_json(fault)
        else:
            _say(f"armed fault #{fault['id']}: {_describe_fault(fault)}")
        return 0

    _guard(body, output)


@fault_group.command("list")
@output_option()
@click.pass_context
def fault_list_cmd(ctx: click.Context, output: str) -> None:
    """The armed faults, oldest (applied first) first."""

    def body() -> int:
        armed = _simulator(ctx).list_faults()
        if output == "json":
            emit_json(armed)
        elif not armed:
            click.echo("no faults armed")
        else:
            for fault in armed:
                click.echo(f"#{fault['id']}: {_describe_fault(fault)}")
        return 0

    _guard(body, output)


@fault_group.command("clear")
@click.option("--op", default=None, help="Only the faults armed for this operation.")
@click.pass_context
def fault_clear_cmd(ctx: click.Context, op: str | None) -> None:
    """Disarm faults (all of them unless --op)."""

    def body() -> int:
        removed = _simulator(ctx).clear_faults(op)
        _say(f"cleared {removed} fault(s)")
        return 0

    _guard(body)


NODE_FAULT_KINDS = {
    "not-ready": "not_ready",
    "gpu-missing": "gpu_missing",
    "gpu-error": "gpu_error",
    "reboot": "reboot",
    "pod-failure": "pod_failure",
    "mig-not-ready-taint": "mig_not_ready_taint",
    "storage-unavailable": "storage_unavailable",
    "mig-disabled": "mig_disabled",
    "nvlink-degraded": "nvlink_degraded",
    "ib-port-down": "ib_port_down",
    # Nebius' own conditions (docs.nebius.com/kubernetes/health-checks, maintenance); `gpu-error` and
    # `nebius-gpu-error` are the same NebiusGPUError condition.
    "nebius-gpu-error": "gpu_error",
    "maintenance-scheduled": "maintenance_scheduled",
    "boot-disk-io": "boot_disk_io_error",
    "replace": "replace",
    "ib-link-degraded": "ib_link_degraded",
    "stale-device-plugin": "stale_device_plugin",
}


@fault_group.command("node")
@click.option("--cluster", "cluster_id", required=True, help="The mk8s cluster's ID.")
@click.option("--node", required=True, help="The node's name (`kubectl get nodes`).")
@click.option(
    "--kind",
    required=True,
    type=click.Choice(sorted(NODE_FAULT_KINDS)),
    help="not-ready: the node goes NotReady; gpu-missing: one GPU fewer in capacity; gpu-error: the "
    "NebiusGPUError condition; reboot: a new boot id; pod-failure: pods on the node fail; "
    "mig-not-ready-taint: the GPU operator's stale nvidia.com/gpu=mig-not-ready:NoSchedule taint, once; "
    "storage-unavailable: the shared filesystem is not mounted on the node (its fstab entry stays, nofail); "
    "mig-disabled: the node's first GPU lost its MIG mode (nvidia-smi: Disabled, pending Enabled; no MIG "
    "devices) while the device plugin still advertises the layout; nvlink-degraded: the node's NVLink "
    "all-reduce bandwidth drops to a quarter; ib-port-down: an InfiniBand port of the node is down (every "
    "all-reduce through the node drops to 40%); nebius-gpu-error: NebiusGPUError (as gpu-error); "
    "maintenance-scheduled: NebiusMaintenanceScheduled; boot-disk-io: NebiusBootDiskIOError; replace: the "
    "node leaves and a new one (new name, new boot id) joins in its place, as auto-repair does; "
    "ib-link-degraded: the node's link to the fabric is slow "
    "(every all-reduce between it and another node drops to half; its own loopback does not); "
    "stale-device-plugin: the node's device plugin keeps stale resources (a whole GPU in capacity, none "
    "allocatable) until GPU feature discovery and then the device plugin on it are restarted.",
)
@click.option("--clear", is_flag=True, help="Clear the fault instead (not for reboot, which is an event).")
@click.pass_context
def fault_node_cmd(ctx: click.Context, cluster_id: str, node: str, kind: str, clear: bool) -> None:
    """Inject a fault into one node of a cluster's Kubernetes API (kwok carries it out)."""

    def body() -> int:
        if kind == "replace":
            replaced = _simulator(ctx).replace_node(cluster_id, node)
            _say(f"node {node} of {cluster_id} replaced by {replaced['by']}")
            return 0
        _simulator(ctx).set_node_fault(cluster_id, node, NODE_FAULT_KINDS[kind], active=not clear)
        _say(f"{'cleared' if clear else 'injected'} {kind} on node {node} of {cluster_id}")
        return 0

    _guard(body)


@local_cloud.group("maintenance")
def maintenance_group() -> None:
    """Maintenance events on a node's instance, as the compute MaintenanceService lists them."""


@maintenance_group.command("add")
@click.option("--cluster", "cluster_id", required=True, help="The mk8s cluster's ID.")
@click.option("--node", required=True, help="The node's name (`kubectl get nodes`).")
@click.option("--reason", required=True, help="The reason code, e.g. HW_GPU_XID_79 or HW_IB_LINK_DOWN.")
@click.option("--planned", is_flag=True, help="A planned event (else unplanned, as hardware faults are).")
@output_option()
@click.pass_context
def maintenance_add_cmd(
    ctx: click.Context, cluster_id: str, node: str, reason: str, planned: bool, output: str
) -> None:
    """An active maintenance event on the node's instance; the node reports NebiusMaintenanceScheduled."""

    def body() -> int:
        event = _simulator(ctx).add_maintenance(cluster_id, node, reason, planned=planned)
        if output == "json":
            emit_json(event)
        else:
            _say(f"maintenance {event['id']} ({event['reason']}) active on node {node} of {cluster_id}")
        return 0

    _guard(body, output)


@maintenance_group.command("finish")
@click.option("--cluster", "cluster_id", required=True, help="The mk8s cluster's ID.")
@click.option("--node", required=True, help="The node's name.")
@click.pass_context
def maintenance_finish_cmd(ctx: click.Context, cluster_id: str, node: str) -> None:
    """Finish the node's active maintenance events; its NebiusMaintenanceScheduled condition clears."""

    def body() -> int:
        done = _simulator(ctx).finish_maintenance(cluster_id, node)
        _say(f"finished {len(done)} maintenance event(s) on node {node} of {cluster_id}")
        return 0

    _guard(body)


SLURM_FAULT_KINDS = {"controller-down": "controller_down", "login-down": "login_down"}
DRIVER_FAULT_KINDS = {"stale-template": "stale_template", "no-repo-mount": "no_repo_mount"}


def _cluster_fault_command(
    name: str, subject: str, kinds: dict[str, str], kinds_help: str, summary: str, cluster_help: str
) -> None:
    """`local-cloud fault NAME --cluster ID --kind K [--clear]`: one switchable fault of a cluster, set
    through the simulator's `set_NAME_fault`."""

    def command(ctx: click.Context, cluster_id: str, kind: str, clear: bool) -> None:
        def body() -> int:
            setter = getattr(_simulator(ctx), f"set_{name}_fault")
            setter(cluster_id, kinds[kind], active=not clear)
            _say(f"{'cleared' if clear else 'injected'} {subject} {kind} on {cluster_id}")
            return 0

        _guard(body)

    command.__doc__ = summary
    options = [
        click.option("--cluster", "cluster_id", required=True, help=cluster_help),
        click.option("--kind", required=True, type=click.Choice(sorted(kinds)), help=kinds_help),
        click.option("--clear", is_flag=True, help="Clear the fault instead."),
    ]
    decorated = click.pass_context(command)
    for option in reversed(options):
        decorated = option(decorated)
    fault_group.command(name)(decorated)


_cluster_fault_command(
    "slurm",
    "Slurm",
    SLURM_FAULT_KINDS,
    "controller-down: the Slurm controller nodes go NotReady; login-down: the login nodes do. The "
    "simulated operator then reports the SlurmCluster `Not available`.",
    "Take down a Slurm role of a soperator cluster (or bring it back).",
    "The soperator cluster's mk8s cluster ID.",
)
_cluster_fault_command(
    "driver",
    "driver",
    DRIVER_FAULT_KINDS,
    "stale-template: the GPU operator updates the driver DaemonSet's template with an OnDelete "
    "strategy, so the running driver pods stay on the older template until deleted; no-repo-mount: the "
    "driver pods no longer mount the fleet's package-repository files (gpu_driver_package_repositories, "
    "RTX clusters).",
    "Break the GPU operator's driver of a cluster (RTX rendering or MIG) (or mend it).",
    "The cluster's mk8s cluster ID.",
)


@fault_group.command("api")
@click.option("--cluster", "cluster_id", required=True, help="The mk8s cluster's ID.")
@click.option(
    "--kind", required=True, type=click.Choice(["unreachable"]), help="unreachable: the API stops answering."
)
@click.option("--clear", is_flag=True, help="Clear the fault instead.")
@click.pass_context
def fault_api_cmd(ctx: click.Context, cluster_id: str, kind: str, clear: bool) -> None:
    """Make a cluster's Kubernetes API unreachable (or reachable again). To have credentials refused,
    arm `fault add --op get_cluster_credentials --error permission_denied`."""

    def body() -> int:
        try:
            _simulator(ctx).set_api_fault(cluster_id, kind, active=not clear)
        except ValueError as err:
            raise UserInputError(str(err)) from None
        _say(f"{'cleared' if clear else 'injected'} API {kind} on {cluster_id}")
        return 0

    _guard(body)


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
        record = getattr(_simulator(ctx), ADDABLE[kind])(**args)
        if output == "json":
            emit_json({"ok": True, "kind": kind, "result": record})
        else:
            _say(f"added {kind} {record['id']} ({record['name']}) to project {project_id}")
        return 0

    _guard(body, output)


@local_cloud.command("set")
@click.argument("name", type=click.Choice(sorted(SETTING_NAMES)))
@click.argument("value", type=click.FloatRange(min=0))
@click.pass_context
def set_cmd(ctx: click.Context, name: str, value: float) -> None:
    """Change a setting: provisioning-seconds (how long new clusters and node groups stay PROVISIONING),
    wait-timeout-seconds (how long the stand-in recipe waits for RUNNING) or project-default-network
    (1: a new project comes with a `default-network`, a `default-subnet-*` and the network's default
    security group, as on Nebius; 0: empty)."""

    def body() -> int:
        _simulator(ctx).set_setting(SETTING_NAMES[name], value)
        _say(f"{name} = {value:g}")
        return 0

    _guard(body)


@local_cloud.command("settings")
@output_option()
@click.pass_context
def settings_cmd(ctx: click.Context, output: str) -> None:
    """The tenant, regions and settings of the local cloud."""

    def body() -> int:
        settings = _simulator(ctx).settings()
        if output == "json":
            emit_json(settings)
        else:
            for key, value in settings.items():
                click.echo(f"{key}: {value}")
        return 0

    _guard(body, output)


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
    (The stand-in recipe calls `python -m npa_pulumi.simulator.api` directly, which starts faster.)"""
    from npa_pulumi.simulator import api

    directory: Path | None = ctx.obj.get("dir") if ctx.obj else None
    if directory is not None:
        import os

        os.environ[db.ENV_DIR] = str(directory)
    sys.exit(api.main(list(arguments)))


def _say(message: str) -> None:
    stderr_console.print(message, soft_wrap=True, markup=False)


def _describe_fault(fault: dict[str, Any]) -> str:
    times = "every call until cleared" if fault["remaining"] is None else f"next {fault['remaining']} call(s)"
    parts = [f"op {fault['op']}", times]
    if fault["latency_ms"]:
        parts.append(f"+{fault['latency_ms']} ms")
    if fault["error"]:
        parts.append(f"-> {fault['error']}")
    return ", ".join(parts)


_TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "projects": ("id", "name", "region", "tenant_id", "state"),
    "networks": ("id", "name", "project_id", "state"),
    "subnets": ("id", "name", "network_id", "cidr", "state"),
    "mk8s_clusters": ("id", "name", "project_id", "state", "k8s_version", "kube_api"),
    "node_groups": (
        "id",
        "name",
        "cluster_id",
        "state",
        "target_node_count",
        "ready_node_count",
        "platform",
        "preset",
    ),
    "filesystems": ("id", "name", "project_id", "size_bytes", "state"),
    "gpu_clusters": ("id", "name", "project_id", "fabric", "state"),
    "buckets": ("id", "name", "project_id", "storage_class", "max_size_bytes"),
    "service_accounts": ("id", "name", "project_id"),
    "access_keys": ("id", "aws_access_key_id", "service_account_id", "state"),
    "security_groups": ("id", "name", "network_id", "default", "state"),
    "iam_groups": ("id", "name", "project_id"),
    "instances": ("id", "name", "project_id", "platform", "state"),
    "disks": ("id", "name", "project_id", "size_bytes", "state"),
    "registries": ("id", "name", "project_id", "state"),
    "capacity_block_groups": ("id", "region", "platform", "fabric", "state", "limit", "usage"),
}


def _print_inventory(simulator: LocalSimulator, inventory: dict[str, list[dict[str, Any]]]) -> None:
    # IDs are what people copy from here: never elide them (wide when piped, folded on a narrow terminal).
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 240)
    settings = simulator.settings()
    console.print(
        f"local cloud {settings['directory']}: tenant {settings['tenant_id']}, regions "
        f"{', '.join(settings['regions'])}, provisioning {settings['provisioning_seconds']:g}s"
    )
    for key, columns in _TABLE_COLUMNS.items():
        rows = inventory[key]
        if not rows:
            continue
        table = Table(title=key.replace("_", " "), title_justify="left")
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(str(row.get(c, "")) for c in columns))
            for condition in row.get("conditions", []):
                table.add_row("", Text(f"{condition['kind']}: {condition['message']}", style="yellow"))
        console.print(table)
    used = [q for q in inventory["quotas"] if q.get("usage")]
    table = Table(
        title=f"quotas in use ({len(used)} of {len(inventory['quotas'])} records)", title_justify="left"
    )
    for column in ("name", "region", "usage", "limit", "unit", "scope"):
        table.add_column(column, overflow="fold")
    for quota in used:
        limit = "unlimited" if quota["limit"] is None else str(quota["limit"])
        scope = quota["parent_id"] or "unscoped"
        table.add_row(quota["name"], quota["region"], str(quota["usage"]), limit, quota["unit"], scope)
    console.print(table)


def register(group: click.Group) -> None:
    group.add_command(local_cloud)
