"""The plan as text: one table per project, one row per cluster."""

from __future__ import annotations

import io
import shutil
from typing import Any

from rich.console import Console
from rich.table import Table

from npa_pulumi.plan.cost import cost_phrase
from npa_pulumi.spec.durations import describe


def render_plan_text(document: dict[str, Any], *, width: int | None = None) -> str:
    """Render a `plan_document` for people. Never shows more than the document holds."""
    buffer = io.StringIO()
    columns = width or max(shutil.get_terminal_size((140, 40)).columns, 100)
    console = Console(file=buffer, width=columns, highlight=False, color_system=None, soft_wrap=False)
    tenant = document["tenant_id"] or "resolved at deploy"
    region = document["region"] or "resolved at deploy"
    console.print(
        f"Fleet {document['name']}: {document['cluster_count']} cluster(s) across "
        f"{document['project_count']} project(s); tenant {tenant}; region {region}"
    )
    for project in document["projects"]:
        console.print()
        where = "will create" if project["will_create"] else f"existing {project['project_id']}"
        console.print(
            f"Project {project['key']} → {project['display_name']} ({where}); region "
            f"{project['region'] or 'resolved at deploy'}; stack {project['stack']}"
        )
        storage = project["object_storage"]
        if storage:
            bucket = storage["bucket_name"] or "name derived at deploy"
            console.print(
                f"  object storage: {storage['storage_class']}, {storage['size_gibibytes']} GiB, {bucket}"
            )
        console.print(_clusters_table(project["clusters"]))
        console.print(f"  project cost: {cost_phrase(project['total_cost'])}")
    if "cost" in document:
        console.print()
        console.print(f"Fleet cost: {cost_phrase(document['cost'])}")
        for item in document["cost"]["unknown"][:20]:
            console.print(f"  not priced: {item['item']} ({item['description']}): {item['reason']}")
        if len(document["cost"]["unknown"]) > 20:
            console.print(f"  ... and {len(document['cost']['unknown']) - 20} more (see --output json)")
        layers = ", ".join(f"{layer['origin']} {layer['version']}" for layer in document["prices"]["layers"])
        console.print(f"  prices: {layers}; a month is 730 hours (npa-pulumi prices shows the catalog)")
    rollout = document.get("rollout")
    if rollout:
        console.print()
        console.print(f"Rollout (halt on {rollout['halt_on']}); each wave starts once the one before passed:")
        for wave in rollout["waves"]:
            reservations = wave.get("reservations") or {}
            names = ", ".join(
                f"{key} ({reservations[key]})" if key in reservations else key for key in wave["clusters"]
            )
            soak = f", then soak {describe(wave['soak_s'])}" if wave.get("soak_s") else ""
            console.print(f"  wave {wave['wave']} ({wave['rule']}{soak}): {names or '(no selected cluster)'}")
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


def _clusters_table(clusters: list[dict[str, Any]]) -> Table:
    """Settings down, clusters across: stays readable in a terminal for the usual few clusters."""
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("  ", no_wrap=True)
    for cluster in clusters:
        table.add_column(cluster["name"], overflow="fold")
    rows = (
        ("backend", lambda c: c["backend"]),
        ("stack", lambda c: c["stack"]),
        ("cpu nodes", lambda c: _pool(c["cpu_nodes"])),
        ("gpu nodes", lambda c: _pool(c["gpu_nodes"])),
        ("gpu capacity", _capacity),
        ("gpu cluster", _gpu_cluster),
        ("gpu driver", _driver),
        ("filestore", _filestore),
        ("kubernetes", lambda c: c["k8s_version"] or "backend default"),
        ("extras", _extras),
        ("cost", lambda c: cost_phrase(c["cost"]) if "cost" in c else "-"),
    )
    for title, cell in rows:
        table.add_row(f"  {title}", *(cell(cluster) for cluster in clusters))
    return table


def _pool(pool: dict[str, Any]) -> str:
    if not pool["count"]:
        return "-"
    shape = " ".join(part for part in (pool["platform"], pool["preset"]) if part)
    preemptible = ", preemptible" if pool.get("preemptible") else ""
    return f"{pool['count']} × {shape}, {pool['disk_size_gib']} GiB disk{preemptible}"


def _capacity(cluster: dict[str, Any]) -> str:
    reservation: str = cluster["gpu_reservation"]
    if reservation == "none":
        return "-"
    if cluster["gpu_nodes"]["preemptible"]:
        return f"{reservation}, preemptible"
    return reservation


def _gpu_cluster(cluster: dict[str, Any]) -> str:
    if not cluster["enable_gpu_cluster"]:
        return "no"
    return f"yes ({cluster['infiniband_fabric']})"


def _driver(cluster: dict[str, Any]) -> str:
    if not cluster["gpu_nodes"]["count"]:
        return "-"
    mode = cluster["gpu_driver_mode"]
    return f"{mode} {cluster['managed_driver_preset']}" if cluster["managed_driver_preset"] else mode


def _filestore(cluster: dict[str, Any]) -> str:
    if not cluster["enable_filestore"]:
        return "no"
    size = "existing" if cluster["existing_filestore"] else f"{cluster['filestore_disk_size_gibibytes']} GiB"
    return f"{size} at {cluster['filestore_mount_path']} (tag {cluster['filestore_mount_tag']})"


def _extras(cluster: dict[str, Any]) -> str:
    extras: list[str] = []
    if cluster["mig"]:
        extras.append(f"MIG {cluster['mig']['strategy']}/{cluster['mig']['config']}")
    if cluster["kuberay"]:
        ray = cluster["kuberay"]
        extras.append(
            f"KubeRay {ray['worker_replicas']}×{ray['worker_cpus']}vCPU/{ray['worker_memory_gib']}GiB"
        )
    if cluster["gpu_workload_profile"]:
        extras.append(cluster["gpu_workload_profile"])
    if cluster["soperator"]:
        workers = sum(worker["size"] for worker in cluster["soperator"]["workers"])
        extras.append(f"Slurm workers: {workers}")
    if cluster["subnet_id"]:
        extras.append(f"subnet {cluster['subnet_id']}")
    return ", ".join(extras) or "-"
