"""The embedded Nebius simulator: every operation of the local cloud, on plain dicts.

`LocalCloud` (the port adapter) turns these dicts into port records; the machine-facing API
(`python -m npa_pulumi.cloud.local.api`) prints them as JSON for the stand-in recipe. The simulator and
its modules stay free of pydantic and other heavy imports so that API starts fast.

    base.py        seeding, the operation envelope (faults, transactions), shared helpers
    projects.py    identity, IAM projects, VPC networks/subnets, quota allowances, capacity blocks
    storage.py     buckets, service accounts, access keys (derivable secrets), the bucket probe
    objects.py     S3 objects and multipart uploads in the buckets (served by s3wire.py)
    compute.py     shared filesystems, GPU clusters
    mk8s.py        mk8s clusters and node groups, bounded waits for the recipe
    admin.py       settings, fault injection, the inventory
    scheduling.py  starting node groups when their quota or capacity block fits
    accounting.py  what each object consumes, and current usage
"""

from __future__ import annotations

from npa_pulumi.cloud.local.admin import ENV_WAIT_TIMEOUT, SETTINGS
from npa_pulumi.cloud.local.base import LocalCloudUnusable
from npa_pulumi.cloud.local.compute import ComputeMixin
from npa_pulumi.cloud.local.mk8s import Mk8sMixin
from npa_pulumi.cloud.local.objects import ObjectsMixin
from npa_pulumi.cloud.local.projects import ProjectsMixin

# Every operation fault injection can target (`*` targets them all).
OPERATIONS: tuple[str, ...] = (
    "principal", "default_region",
    "list_projects", "get_project", "create_project", "delete_project",
    "list_networks", "get_network", "create_network", "delete_network",
    "list_subnets", "get_subnet", "create_subnet", "delete_subnet",
    "list_quota_allowances", "list_capacity_block_groups", "get_capacity_block_group",
    "get_bucket", "find_bucket", "list_buckets", "create_bucket", "delete_bucket", "probe_bucket",
    "count_bucket_objects", "put_object",
    "find_service_account", "list_service_accounts", "create_service_account", "delete_service_account",
    "list_access_keys", "create_access_key", "delete_access_key", "grant_bucket_access",
    "create_cluster", "get_cluster", "list_clusters", "delete_cluster",
    "create_node_group", "get_node_group", "list_node_groups", "delete_node_group", "resize_node_group",
    "edit_node_group_template",
    "set_cluster_addons", "get_cluster_credentials",
    "create_filesystem", "get_filesystem", "list_filesystems", "delete_filesystem",
    "create_gpu_cluster", "get_gpu_cluster", "list_gpu_clusters", "delete_gpu_cluster",
)  # fmt: skip


class LocalSimulator(ProjectsMixin, ObjectsMixin, ComputeMixin, Mk8sMixin):
    """The local Nebius simulator bound to one directory (`$NPA_LOCAL_CLOUD_DIR`, else
    `~/.npa-pulumi/local-cloud/`); seeded from the default tenant fixture on first use."""


__all__ = ["ENV_WAIT_TIMEOUT", "OPERATIONS", "SETTINGS", "LocalCloudUnusable", "LocalSimulator"]
