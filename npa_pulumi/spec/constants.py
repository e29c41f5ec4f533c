"""Values the spec semantics are built on, spelled once (original `npa fleet` semantics, reference §2–§4)."""

from __future__ import annotations

from enum import StrEnum
from typing import Final

API_VERSION: Final = "npa.fleet/v0.0.1"


class BackendKind(StrEnum):
    """Which backend deploys a cluster: the spec's `backend` vocabulary, the one every layer names a backend
    by (plan targets, the engine's backends, results); JSON and state carry its value."""

    MK8S = "mk8s"
    SOPERATOR = "soperator"

    @classmethod
    def parse(cls, value: str) -> BackendKind | None:
        """The kind `value` names, or None when no backend is called that."""
        try:
            return cls(value)
        except ValueError:
            return None


class FaultReason(StrEnum):
    """Why a GPU node needs repair: the faults `health` already judges (engine/health/model.py), the keys of
    the spec's `remediation.ladders`. Maintenance is no fault: Nebius works through it on its own schedule."""

    GPU_ERROR = "gpu-error"  # NebiusGPUError
    BOOT_DISK_IO_ERROR = "boot-disk-io-error"  # NebiusBootDiskIOError
    NOT_READY = "not-ready"  # the Ready condition is not True
    GPUS_MISSING = "gpus-missing"  # fewer allocatable GPUs than the preset
    FAILED_REQUALIFICATION = "failed-requalification"  # the gate's probes failed on it
    UNQUALIFIED = "unqualified"  # healthy, but it joined after the last gate pass


class Rung(StrEnum):
    """One step of a repair ladder, in the order the default ladder takes them."""

    REQUALIFY = "requalify"  # the gate's per-node probes again (health --requalify)
    CORDON_AND_REPORT = "cordon-and-report"  # cordon (soperator: Slurm drain with a reason) and notify
    CLOUD_RECOVERY = "cloud-recovery"  # the cloud's own recovery of the node's instance
    REMOVE_FROM_GROUP = "remove-from-group"  # delete the node so that its group replaces it
    FLAG_HARDWARE = "flag-hardware"  # kept out of rotation, flagged for hardware replacement


DEFAULT_LADDER: Final = tuple(Rung)
DEFAULT_BREAKER_PERCENT: Final = 20
DEFAULT_REPEAT_INCIDENTS: Final = 3
DEFAULT_REPEAT_WINDOW: Final = "7d"
DEFAULT_ESCALATE_AFTER: Final = "30m"

# Node pools.
DEFAULT_CPU_PLATFORM: Final = "cpu-d3"
DEFAULT_GPU_PLATFORM: Final = "gpu-rtx6000"
DEFAULT_CPU_DISK_GIB: Final = 128
DEFAULT_GPU_DISK_GIB: Final = 1023

# Shared filesystem.
DEFAULT_FILESTORE_GIB: Final = 1024
DEFAULT_FILESTORE_MOUNT_PATH: Final = "/mnt/data"
DEFAULT_FILESTORE_MOUNT_TAG: Final = "data"
FILESYSTEM_CSI_CHART_VERSION: Final = "0.1.6"
FILESYSTEM_CSI_NAMESPACE: Final = "kube-system"
FILESYSTEM_CSI_PREVIOUS_DEFAULT_SC: Final = "compute-csi-default-sc"

# GPU driver strategy.
GPU_DRIVER_MODES: Final = ("auto", "managed-image", "operator")
DEFAULT_MANAGED_DRIVER_PRESET: Final = "cuda13.0"

# GPU health gate.
DEFAULT_STABILIZATION_SECONDS: Final = 120
DEFAULT_HEALTH_TIMEOUT_MINUTES: Final = 60
DEFAULT_CUDA_SMOKE_IMAGE: Final = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"
# The graphics readiness probe's image (GLX and EGL loaded from python3 through ctypes, `vulkaninfo
# --summary`): the original tool's probe image, by the digest its live RTX PRO 6000 test ran this very
# probe with (docs/health-and-verifiers.md, "The graphics probe's image", says what is verified and what not).
DEFAULT_GRAPHICS_SMOKE_IMAGE: Final = (
    "ghcr.io/nebius/nebius-physical-ai/npa-sonic"
    "@sha256:c9ba0996b28f54b013e36da689638b386a7ef9c0c8c4413fc4b3c72ff1a808bb"
)

# RTX PRO 6000 rendering profile.
RTX_RENDERING_PROFILE: Final = "rtx-rendering"
GPU_WORKLOAD_PROFILES: Final = ("", RTX_RENDERING_PROFILE)
RTX_PLATFORM: Final = "gpu-rtx6000"
RTX_PLATFORM_PATTERN: Final = r"gpu-rtx6000(?:-[a-z])?"
RTX_1GPU_PRESET: Final = "1gpu-24vcpu-218gb"
RTX_8GPU_PRESET: Final = "8gpu-192vcpu-1744gb"
RTX_PRESETS: Final = (RTX_1GPU_PRESET, RTX_8GPU_PRESET)

# RTX PRO 6000 hardware MIG: the one tested tuple, with pinned component versions.
MIG_PLATFORM: Final = RTX_PLATFORM
MIG_PRESET: Final = RTX_1GPU_PRESET
MIG_GPU_WORKERS: Final = 2
MIG_BOOT_DISK_GIB: Final = 128
MIG_KUBERNETES_VERSION: Final = "1.34"
MIG_STRATEGY: Final = "mixed"
MIG_CONFIG: Final = "all-balanced"
MIG_PINNED_VERSIONS: Final[dict[str, str]] = {
    "gpu_operator_version": "v26.3.3",
    "gpu_driver_version": "580.173.02",
    "gpu_device_plugin_version": "v0.19.3",
    "gpu_gfd_version": "v0.19.3",
    "gpu_mig_manager_version": "v0.14.2",
}
# Checked on the cluster (not a tfvar): the container toolkit the pinned operator release ships.
MIG_TOOLKIT_VERSION: Final = "v1.19.1"
MIG_RESOURCES_PER_GPU: Final[dict[str, int]] = {
    "nvidia.com/gpu": 0,
    "nvidia.com/mig-1g.24gb": 2,
    "nvidia.com/mig-2g.48gb": 1,
}

# KubeRay (CPU RayCluster only).
KUBERAY_HEAD_CPUS: Final = 1
KUBERAY_HEAD_MEMORY_GIB: Final = 4
RAY_VERSION: Final = "2.58.0"
# The KubeRay operator's release and image are pinned in tools/pins.toml [kuberay]
# (npa_pulumi.runtime.pins.kuberay_operator_image).
RAY_IMAGE: Final = (
    "docker.io/rayproject/ray@sha256:507464fe56b3d24cec2e812a25850db91b97d52752d63119fecf6914f7b0a37a"
)

# Object storage.
STORAGE_CLASSES: Final[dict[str, str]] = {
    "standard": "standard",
    "enhanced": "enhanced_throughput",
    "enhanced_throughput": "enhanced_throughput",
    "intelligent": "intelligent",
}

# Soperator payload: identity belongs to the fleet envelope, never to the payload.
SOPERATOR_IDENTITY_FIELDS: Final = ("tenant_id", "project_id", "region", "subnet_id")
