"""A soperator cluster's native Slurm status for `status` and `up`: read live from the cluster's API (the
SlurmCluster's phase and conditions, its NodeSets ready/desired, the login endpoint), else what the
cluster's Slurm gate last saw, as its stack recorded it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext

log = logging.getLogger(__name__)


def recorded_slurm_status(outputs: dict[str, Any]) -> dict[str, Any] | None:
    """What the gate last saw (the `slurm_status` output), or None for a stack without one."""
    seen = outputs.get("slurm_status")
    if isinstance(seen, dict) and seen:
        return {**seen, "source": "gate"}
    return None


def slurm_status(fleet: FleetContext, outputs: dict[str, Any]) -> dict[str, Any] | None:
    """The live status when the cluster's API answers, else the recorded one; None for a stack that is
    not a soperator cluster."""
    if outputs.get("backend") != "soperator":
        return None
    cluster_id, context = outputs.get("cluster_id"), outputs.get("kube_context")
    if cluster_id and context:
        try:
            from npa_pulumi.kube.client import KubeClient
            from npa_pulumi.kube.kubeconfig import dump
            from npa_pulumi.kube.slurm_check import native_status

            kubeconfig = dump(fleet.cloud.cluster_access(str(cluster_id)).kubeconfig(str(context)))
            client = KubeClient.from_kubeconfig(kubeconfig, timeout_s=10.0)
            slurm = outputs.get("slurm_cluster") or {}
            live = native_status(client, slurm.get("name", "soperator"), slurm.get("namespace", "soperator"))
            return {**live, "source": "live"}
        except Exception as err:  # no API (a local cloud without one), refused credentials, a timeout
            log.info("live Slurm status of %s: %s", cluster_id, err)
    return recorded_slurm_status(outputs)
