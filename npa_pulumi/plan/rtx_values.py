"""The GPU Operator values of the RTX rendering profile, as typed data, and their revision.

What the original pins for `gpu_workload_profile: rtx-rendering`:
* the marketplace chart's driver CRD patch (`nebius.nvidiaDriverCRDPatch.profiles`) holds exactly the
  requested RTX pool, platform *and* preset: its default `gpu-rtx6000` selector does not match zonal
  platforms such as `gpu-rtx6000-a`, and workers are never relabelled to hide that;
* RDMA stays disabled (RTX PRO 6000 pools are not fabric-attached);
* the container toolkit reads containerd's configuration file (`RUNTIME_CONFIG_SOURCE=file`): newer
  containerd binaries migrate the schema in `containerd config dump`, and a drop-in written from that
  can keep containerd from starting;
* with `gpu_driver_package_repositories`, the operator's `driver.repoConfig` names the fleet-owned
  ConfigMap in the operator's namespace (a pod mounts ConfigMaps of its own namespace only).

The revision is the SHA-256 of the canonical JSON of the values together with the digest of the
repository files. The release's values can be write-only (Terraform keeps no copy to compare), and the
repository files are mounted by `subPath` (a running pod never sees them change): the revision is the
one input whose change tells the recipe to update the release and roll the driver pods.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from npa_pulumi.kube.gpu_operator import REPOSITORIES_CONFIGMAP, RUNTIME_CONFIG_SOURCE, file_digests
from npa_pulumi.plan.targets import ResolvedCluster
from npa_pulumi.spec.constants import RTX_RENDERING_PROFILE


class DriverPoolProfile(BaseModel):
    """One entry of the driver CRD patch: the node pool one NVIDIADriver selects."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    platform: str
    preset: str


class RtxOperatorValues(BaseModel):
    """The values the fleet sets on the GPU Operator release of an RTX rendering cluster."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    driver_profiles: tuple[DriverPoolProfile, ...]
    rdma_enabled: bool = False
    toolkit_runtime_config_source: str = "file"
    repo_config_map: str = ""  # empty: the driver image's own sources
    # file -> SHA-256 of its content: in the revision, never the sources themselves
    repositories: dict[str, str] = Field(default_factory=dict)

    def helm_values(self) -> dict[str, Any]:
        """The chart values, in the operator chart's (and the marketplace chart's) own keys."""
        driver: dict[str, Any] = {"rdma": {"enabled": self.rdma_enabled}}
        if self.repo_config_map:
            driver["repoConfig"] = {"configMapName": self.repo_config_map}
        return {
            "nebius": {"nvidiaDriverCRDPatch": {"profiles": [p.model_dump() for p in self.driver_profiles]}},
            "driver": driver,
            "toolkit": {
                "env": [{"name": RUNTIME_CONFIG_SOURCE, "value": self.toolkit_runtime_config_source}]
            },
        }

    def revision(self) -> str:
        """SHA-256 of the canonical JSON (sorted keys, no whitespace) of the values and the file digests."""
        document = {"values": self.helm_values(), "repositories": dict(sorted(self.repositories.items()))}
        canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canonical.encode()).hexdigest()


def rtx_operator_values(platform: str, preset: str, repositories: Mapping[str, str]) -> RtxOperatorValues:
    """The values for exactly one RTX pool, with its package repositories (file -> content) if any."""
    return RtxOperatorValues(
        driver_profiles=(DriverPoolProfile(platform=platform, preset=preset),),
        repo_config_map=REPOSITORIES_CONFIGMAP if repositories else "",
        repositories=file_digests(repositories),
    )


def cluster_rtx_values(cluster: ResolvedCluster) -> RtxOperatorValues | None:
    """The RTX values of a cluster with the rendering profile and a GPU pool; None for any other."""
    gpu = cluster.gpu_nodes
    if cluster.gpu_workload_profile != RTX_RENDERING_PROFILE or gpu is None:
        return None
    return rtx_operator_values(gpu.platform, gpu.preset, dict(cluster.gpu_driver_package_repositories))
