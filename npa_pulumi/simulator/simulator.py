"""The embedded Nebius simulator: every operation of the local cloud, on plain dicts.

`LocalCloud` (the port adapter) turns these dicts into port records; the machine-facing API
(`python -m npa_pulumi.simulator.api`) prints them as JSON for the stand-in recipe. The simulator and
its modules stay free of pydantic and other heavy imports so that API starts fast.

    base.py        seeding, the operation envelope (faults, transactions), shared helpers
    projects.py    identity, IAM projects, VPC networks/subnets/security groups, quotas, capacity blocks
    storage.py     buckets, service accounts, access keys (derivable secrets), the bucket probe
    objects.py     S3 objects and multipart uploads in the buckets (served by s3wire.py)
    compute.py     shared filesystems, GPU clusters
    holdings.py    what else a project can hold: instances, disks, registries, IAM groups
    mk8s.py        mk8s clusters and node groups, bounded waits for the recipe
    node_health.py maintenance events on nodes' instances, node replacement (auto-repair)
    admin.py       settings, fault injection, the inventory
    scheduling.py  starting node groups when their quota or capacity block fits
    accounting.py  what each object consumes, and current usage
"""

from __future__ import annotations

from npa_pulumi.simulator.admin import ENV_WAIT_TIMEOUT, SETTINGS
from npa_pulumi.simulator.base import LocalCloudUnusable
from npa_pulumi.simulator.compute import ComputeMixin
from npa_pulumi.simulator.faults import OPERATIONS
from npa_pulumi.simulator.holdings import HoldingsMixin
from npa_pulumi.simulator.mk8s import Mk8sMixin
from npa_pulumi.simulator.node_health import NodeHealthMixin
from npa_pulumi.simulator.objects import ObjectsMixin
from npa_pulumi.simulator.projects import ProjectsMixin


class LocalSimulator(ProjectsMixin, ObjectsMixin, ComputeMixin, HoldingsMixin, Mk8sMixin, NodeHealthMixin):
    """The local Nebius simulator bound to one directory (`$NPA_LOCAL_CLOUD_DIR`, else
    `~/.npa-pulumi/local-cloud/`); seeded from the default tenant fixture on first use."""


__all__ = ["ENV_WAIT_TIMEOUT", "OPERATIONS", "SETTINGS", "LocalCloudUnusable", "LocalSimulator"]
