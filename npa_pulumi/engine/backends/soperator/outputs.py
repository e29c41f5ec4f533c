"""A soperator cluster stack's outputs: every cluster stack's (engine/outputs.py) and its backend, its
filestores, the Slurm cluster the gate waits for and the Slurm status the gate last saw."""

from __future__ import annotations

from typing import Any

from npa_pulumi.engine.backends.soperator.plan import SLURM_NAME, SLURM_NAMESPACE
from npa_pulumi.output.stack_outputs import ClusterOutputs, Record


class SoperatorOutputs(ClusterOutputs):
    filestores: Any = None
    slurm_cluster: Record = None  # {name, namespace} of the SlurmCluster
    slurm_status: Record = None  # native_status()'s shape, as the gate last saw it

    def slurm_cluster_name(self) -> tuple[str, str]:
        """The SlurmCluster's name and namespace (the recipe's fixed ones when the stack records none)."""
        recorded = self.slurm_cluster or {}
        return str(recorded.get("name", SLURM_NAME)), str(recorded.get("namespace", SLURM_NAMESPACE))
