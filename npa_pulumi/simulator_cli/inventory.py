"""`local-cloud show`'s text: the tenant and settings, a table per kind of object, and the quotas in use."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from npa_pulumi.simulator.simulator import LocalSimulator

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


def print_inventory(simulator: LocalSimulator, inventory: dict[str, list[dict[str, Any]]]) -> None:
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
