"""A soperator cluster's native Slurm status for `status` and `up`: read live from the cluster's API (the
SlurmCluster's phase and conditions, its NodeSets ready/desired, the login endpoint), else what the
cluster's Slurm gate last saw, as its stack recorded it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.backends.base import NativeStatus
from npa_pulumi.engine.backends.soperator.plan import SLURM_NAME, SLURM_NAMESPACE

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort

log = logging.getLogger(__name__)


def recorded_status(outputs: Mapping[str, Any]) -> NativeStatus:
    """What the gate last saw (the `slurm_status` output); nothing for a stack without one."""
    seen = outputs.get("slurm_status")
    if isinstance(seen, dict) and seen:
        return NativeStatus(slurm={**seen, "source": "gate"})
    return NativeStatus()


def native_status(cloud: CloudPort, outputs: Mapping[str, Any]) -> NativeStatus:
    """The live status when the cluster's API answers, else the recorded one."""
    cluster_id, context = outputs.get("cluster_id"), outputs.get("kube_context")
    if cluster_id and context:
        try:
            from npa_pulumi.kube.client import KubeClient
            from npa_pulumi.kube.kubeconfig import dump
            from npa_pulumi.kube.slurm_check import native_status as read_native

            kubeconfig = dump(cloud.cluster_access(str(cluster_id)).kubeconfig(str(context)))
            client = KubeClient.from_kubeconfig(kubeconfig, timeout_s=10.0)
            slurm = outputs.get("slurm_cluster") or {}
            live = read_native(client, slurm.get("name", SLURM_NAME), slurm.get("namespace", SLURM_NAMESPACE))
            return NativeStatus(slurm={**live, "source": "live"})
        except Exception as err:  # no API (a local cloud without one), refused credentials, a timeout
            log.info("live Slurm status of %s: %s", cluster_id, err)
    return recorded_status(outputs)
