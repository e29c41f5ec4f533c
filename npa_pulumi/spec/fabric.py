"""The fabric check's thresholds: NCCL all-reduce bus bandwidth a GPU node (intra-node, NVLink/NVSwitch)
and an InfiniBand fabric (inter-node) must reach, per platform and preset, with where each figure comes
from. A cluster's `gpu_fabric_check` block overrides them (docs/health-and-verifiers.md lists them).

Only multi-GPU NVLink/NVSwitch shapes (more than one GPU per node on an `-sxm`/`-nvl` platform) have an
intra-node fabric to measure; the inter-node check needs an InfiniBand GPU cluster as well. Every other
cluster records the check as `not-applicable`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from npa_pulumi.runtime.presets import gpus_per_node

SOPERATOR_DEFAULT = (
    "Nebius soperator recipe default nccl_benchmark_min_threshold (420 GB/s, single-node all_reduce_perf "
    "on 8-GPU H100/H200)"
)
PUBLISHED_MULTI_NODE = (
    "90% of the low end of published 8-GPU H100/H200 multi-node all-reduce over NVLink + NDR InfiniBand "
    "(400-450 GB/s: saturncloud.io, Crusoe cluster validation)"
)
NO_PUBLISHED_FIGURE = "no public figure found: the H100/H200 floor (override it per cluster)"


@dataclass(frozen=True)
class FabricThreshold:
    intra_node_gbps: int
    inter_node_gbps: int
    intra_node_source: str
    inter_node_source: str

    @property
    def source(self) -> str:
        return f"intra-node: {self.intra_node_source}; inter-node: {self.inter_node_source}"


_H100_H200 = FabricThreshold(420, 360, SOPERATOR_DEFAULT, PUBLISHED_MULTI_NODE)
_FLOOR = FabricThreshold(420, 360, NO_PUBLISHED_FIGURE, NO_PUBLISHED_FIGURE)
# (GPU family of the platform, GPUs per node) -> thresholds (GB/s).
FABRIC_THRESHOLDS: dict[tuple[str, int], FabricThreshold] = {
    ("h100", 8): _H100_H200,
    ("h200", 8): _H100_H200,
    ("b200", 8): _FLOOR,
    ("b300", 8): _FLOOR,
}
DEFAULT_MIN_BYTES = "512M"
DEFAULT_MAX_BYTES = "8G"
DEFAULT_STEP_FACTOR = 2
DEFAULT_TIMEOUT_MINUTES = 15
_SIZE_RE = re.compile(r"(\d+)([KMG]?)")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def gpu_family(platform: str) -> str:
    found = re.match(r"gpu-([a-z0-9]+?)(?:-sxm|-pcie|-nvl|-[a-z])*$", platform.strip().lower())
    return found.group(1) if found else ""


def has_nvlink_fabric(platform: str, preset: str) -> bool:
    """More than one GPU per node joined by NVLink/NVSwitch (an `-sxm`/`-nvl` platform)."""
    normalized = platform.strip().lower()
    return gpus_per_node(preset) > 1 and ("-sxm" in normalized or "-nvl" in normalized)


def thresholds_for(platform: str, preset: str) -> FabricThreshold:
    return FABRIC_THRESHOLDS.get((gpu_family(platform), gpus_per_node(preset)), _FLOOR)


def size_bytes(text: str) -> int | None:
    """nccl-tests' size syntax (`512M`, `8G`, `1024`), None when it is not one."""
    found = _SIZE_RE.fullmatch(text.strip().upper())
    return int(found.group(1)) * _UNITS[found.group(2)] if found else None
