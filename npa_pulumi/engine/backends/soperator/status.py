"""A soperator cluster's native Slurm status for `status` and `up`: read live from the cluster's API (the
SlurmCluster's phase and conditions, its NodeSets ready/desired, the login endpoint), else what the
cluster's Slurm gate last saw, as its stack recorded it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.backends.base import NativeStatus
from npa_pulumi.engine.backends.soperator.outputs import SoperatorOutputs

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort

log = logging.getLogger(__name__)


def recorded_status(outputs: Mapping[str, Any]) -> NativeStatus:
    """What the gate last saw (the `slurm_status` output); nothing for a stack without one."""
    seen = SoperatorOutputs.read(outputs).slurm_status
    return NativeStatus({"slurm": {**seen, "source": "gate"}}) if seen else NativeStatus()


def native_status(cloud: CloudPort, outputs: Mapping[str, Any]) -> NativeStatus:
    """The live status when the cluster's API answers, else the recorded one."""
    recorded = SoperatorOutputs.read(outputs)
    if recorded.cluster_id and recorded.kube_context:
        try:
            from npa_pulumi.kube.client import KubeClient
            from npa_pulumi.kube.kubeconfig import dump
            from npa_pulumi.kube.slurm_check import native_status as read_native

            kubeconfig = dump(cloud.cluster_access(recorded.cluster_id).kubeconfig(recorded.kube_context))
            client = KubeClient.from_kubeconfig(kubeconfig, timeout_s=10.0)
            live = read_native(client, *recorded.slurm_cluster_name())
            return NativeStatus({"slurm": {**live, "source": "live"}})
        except Exception as err:  # no API (a local cloud without one), refused credentials, a timeout
            log.info("live Slurm status of %s: %s", recorded.cluster_id, err)
    return recorded_status(outputs)
