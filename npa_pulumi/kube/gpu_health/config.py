"""The GPU health gate's settings (`GateConfig`), what one look at a cluster found (`Snapshot`) and what
a run proves (`Evidence`), plus the names every part of the gate shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

JSON = dict[str, Any]
SMOKE_LABEL = "app.kubernetes.io/managed-by"
SMOKE_LABEL_VALUE = "npa-gpu-health"
DRIVER_NAMESPACES = {"managed-image": "nvidia-device-plugin", "operator": "gpu-operator"}
# Optional settings a gate's stored inputs carry even at their defaults (the shape stack state has always
# had: a `gate` property that changed shape would re-run every deployed gate).
_ALWAYS_STORED = ("graphics_smoke", "graphics_image")


@dataclass(frozen=True)
class GateConfig:
    expected_nodes: int
    expected_gpu_nodes: int
    gpus_per_node: int
    gpu_platform: str
    driver_mode: str  # managed-image | operator | "" (no GPUs)
    nvswitch: bool
    stabilization_s: float
    timeout_s: float
    cuda_smoke: bool
    smoke_image: str
    smoke_namespace: str = "npa-system"
    poll_s: float = 2.0
    # MIG readiness instead of whole GPUs: the exact per-node resources of the layout (whole
    # `nvidia.com/gpu` must be 0), and its strategy and config as MIG Manager labels them.
    mig_resources: dict[str, int] | None = None
    mig_strategy: str = ""
    mig_config: str = ""
    # The GPU operator release MIG is pinned to (operator, driver, device_plugin, gfd, mig_manager,
    # toolkit): its ClusterPolicy and component DaemonSets must run exactly these.
    mig_versions: dict[str, str] | None = None
    # RTX rendering: GLX, EGL and Vulkan readiness on every GPU node, after the CUDA smoke.
    graphics_smoke: bool = False
    graphics_image: str = ""
    # RTX rendering with package repositories: the ConfigMap `driver.repoConfig` names (in the operator's
    # namespace) and its files (name -> SHA-256 of the content), which every driver pod must mount.
    driver_repo_configmap: str = ""
    driver_repositories: dict[str, str] | None = None

    def to_inputs(self) -> JSON:
        """The settings as a dynamic resource's input (plain JSON, kept in stack state): every required
        field, and an optional one only when it is set (or in `_ALWAYS_STORED`)."""
        stored: JSON = {}
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.default is MISSING or spec.name in _ALWAYS_STORED or value != spec.default:
                stored[spec.name] = value
        return {k: dict(v) if isinstance(v, dict) else v for k, v in stored.items()}

    @classmethod
    def from_inputs(cls, stored: Mapping[str, Any]) -> GateConfig:
        """The settings back from a dynamic resource's input (as `to_inputs` wrote them)."""
        return cls(**stored)

    @property
    def mig(self) -> bool:
        return self.mig_resources is not None

    @property
    def clean_snapshots_needed(self) -> int:
        """MIG readiness needs two consecutive exact snapshots (MIG Manager reconfigures in steps)."""
        return 2 if self.mig else 1

    @property
    def smoke_resource(self) -> str:
        if self.mig_resources:
            return next((r for r, n in self.mig_resources.items() if r != "nvidia.com/gpu" and n > 0), "")
        return "nvidia.com/gpu"

    @property
    def expected_gpus(self) -> int:
        return self.expected_gpu_nodes * self.gpus_per_node


@dataclass
class Snapshot:
    at_s: float
    errors: list[str] = field(default_factory=list)
    nodes: int = 0
    ready_nodes: int = 0
    gpu_nodes: list[str] = field(default_factory=list)
    gpus: int = 0
    boot_ids: dict[str, str] = field(default_factory=dict)
    ready: dict[str, bool] = field(default_factory=dict)

    def complete(self, config: GateConfig) -> bool:
        return (
            self.nodes >= config.expected_nodes
            and len(self.gpu_nodes) == config.expected_gpu_nodes
            and bool(self.boot_ids)
            and all(self.boot_ids.values())
        )


@dataclass
class Evidence:
    passed: bool
    phase: str  # stabilization | smoke | done
    reason: str
    elapsed_s: float
    snapshots: int
    last_errors: list[str]
    nodes: dict[str, JSON]  # name -> {ready, gpus, boot_id, smoke}
    stable_after_s: float | None = None
    # When the gate decided (UTC, ISO 8601): `health` measures the time since the last pass from it.
    finished_at: str = ""

    def to_json(self) -> JSON:
        return asdict(self)


def quantity(value: Any) -> int:
    """A Kubernetes count (`"8"`, 8) as an int; 0 when it is not one."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0
