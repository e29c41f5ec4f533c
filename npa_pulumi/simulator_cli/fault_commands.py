"""`local-cloud fault …` and `local-cloud maintenance …`: fail or slow the cloud's operations, break a
node, a Slurm role, the GPU driver or a cluster's API, and put maintenance events on nodes' instances."""

from __future__ import annotations

from typing import Any

import click

from npa_pulumi.cli.common import output_option
from npa_pulumi.cloud.errors import ERROR_KINDS
from npa_pulumi.errors import UserInputError
from npa_pulumi.output.streams import emit_json
from npa_pulumi.simulator.simulator import OPERATIONS
from npa_pulumi.simulator_cli.common import guard, say, simulator_of


@click.group("fault")
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
        fault = simulator_of(ctx).add_fault(
            op, error_kind, count=None if forever else count, latency_ms=latency_ms, message=message
        )
        if output == "json":
            emit_json(fault)
        else:
            say(f"armed fault #{fault['id']}: {_describe_fault(fault)}")
        return 0

    guard(body, output)


@fault_group.command("list")
@output_option()
@click.pass_context
def fault_list_cmd(ctx: click.Context, output: str) -> None:
    """The armed faults, oldest (applied first) first."""

    def body() -> int:
        armed = simulator_of(ctx).list_faults()
        if output == "json":
            emit_json(armed)
        elif not armed:
            click.echo("no faults armed")
        else:
            for fault in armed:
                click.echo(f"#{fault['id']}: {_describe_fault(fault)}")
        return 0

    guard(body, output)


@fault_group.command("clear")
@click.option("--op", default=None, help="Only the faults armed for this operation.")
@click.pass_context
def fault_clear_cmd(ctx: click.Context, op: str | None) -> None:
    """Disarm faults (all of them unless --op)."""

    def body() -> int:
        removed = simulator_of(ctx).clear_faults(op)
        say(f"cleared {removed} fault(s)")
        return 0

    guard(body)


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
    "defective-host": "defective_host",
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
    "allocatable) until GPU feature discovery and then the device plugin on it are restarted; "
    "defective-host: the node's faults survive a recovery (the repair ladder's cloud-recovery: a stop and "
    "start of its instance); only a new node clears them.",
)
@click.option("--clear", is_flag=True, help="Clear the fault instead (not for reboot, which is an event).")
@click.pass_context
def fault_node_cmd(ctx: click.Context, cluster_id: str, node: str, kind: str, clear: bool) -> None:
    """Inject a fault into one node of a cluster's Kubernetes API (kwok carries it out)."""

    def body() -> int:
        if kind == "replace":
            replaced = simulator_of(ctx).replace_node(cluster_id, node)
            say(f"node {node} of {cluster_id} replaced by {replaced['by']}")
            return 0
        simulator_of(ctx).set_node_fault(cluster_id, node, NODE_FAULT_KINDS[kind], active=not clear)
        say(f"{'cleared' if clear else 'injected'} {kind} on node {node} of {cluster_id}")
        return 0

    guard(body)


@click.group("maintenance")
def maintenance_group() -> None:
    """Maintenance events on a node's instance, as the compute MaintenanceService lists them."""


@maintenance_group.command("add")
@click.option("--cluster", "cluster_id", required=True, help="The mk8s cluster's ID.")
@click.option("--node", required=True, help="The node's name (`kubectl get nodes`).")
@click.option("--reason", required=True, help="The reason code, e.g. HW_GPU_XID_79 or HW_IB_LINK_DOWN.")
@click.option("--planned", is_flag=True, help="A planned event (else unplanned, as hardware faults are).")
@click.option(
    "--deadline",
    default="",
    help="Its SLA deadline (RFC 3339, e.g. 2026-12-12T03:00:00Z): when the cloud acts on its own.",
)
@output_option()
@click.pass_context
def maintenance_add_cmd(
    ctx: click.Context, cluster_id: str, node: str, reason: str, planned: bool, deadline: str, output: str
) -> None:
    """An active maintenance event on the node's instance; the node reports NebiusMaintenanceScheduled."""

    def body() -> int:
        cloud = simulator_of(ctx)
        event = cloud.add_maintenance(cluster_id, node, reason, planned=planned, sla_deadline=deadline)
        if output == "json":
            emit_json(event)
        else:
            say(f"maintenance {event['id']} ({event['reason']}) active on node {node} of {cluster_id}")
        return 0

    guard(body, output)


@maintenance_group.command("finish")
@click.option("--cluster", "cluster_id", required=True, help="The mk8s cluster's ID.")
@click.option("--node", required=True, help="The node's name.")
@click.pass_context
def maintenance_finish_cmd(ctx: click.Context, cluster_id: str, node: str) -> None:
    """Finish the node's active maintenance events; its NebiusMaintenanceScheduled condition clears."""

    def body() -> int:
        done = simulator_of(ctx).finish_maintenance(cluster_id, node)
        say(f"finished {len(done)} maintenance event(s) on node {node} of {cluster_id}")
        return 0

    guard(body)


SLURM_FAULT_KINDS = {"controller-down": "controller_down", "login-down": "login_down"}
DRIVER_FAULT_KINDS = {"stale-template": "stale_template", "no-repo-mount": "no_repo_mount"}


def _cluster_fault_command(
    name: str, subject: str, kinds: dict[str, str], kinds_help: str, summary: str, cluster_help: str
) -> None:
    """`local-cloud fault NAME --cluster ID --kind K [--clear]`: one switchable fault of a cluster, set
    through the simulator's `set_NAME_fault`."""

    def command(ctx: click.Context, cluster_id: str, kind: str, clear: bool) -> None:
        def body() -> int:
            setter = getattr(simulator_of(ctx), f"set_{name}_fault")
            setter(cluster_id, kinds[kind], active=not clear)
            say(f"{'cleared' if clear else 'injected'} {subject} {kind} on {cluster_id}")
            return 0

        guard(body)

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
            simulator_of(ctx).set_api_fault(cluster_id, kind, active=not clear)
        except ValueError as err:
            raise UserInputError(str(err)) from None
        say(f"{'cleared' if clear else 'injected'} API {kind} on {cluster_id}")
        return 0

    guard(body)


def _describe_fault(fault: dict[str, Any]) -> str:
    times = "every call until cleared" if fault["remaining"] is None else f"next {fault['remaining']} call(s)"
    parts = [f"op {fault['op']}", times]
    if fault["latency_ms"]:
        parts.append(f"+{fault['latency_ms']} ms")
    if fault["error"]:
        parts.append(f"-> {fault['error']}")
    return ", ".join(parts)
