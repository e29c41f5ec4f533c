"""Pure helpers that turn declared values into effective ones (reference §3.2, §3.3).

Shared by validation and planning so the two can never disagree about, say, whether a cluster is an
NVSwitch topology.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from npa_pulumi.runtime.presets import gpus_per_node
from npa_pulumi.spec.constants import (
    DEFAULT_CPU_DISK_GIB,
    DEFAULT_MANAGED_DRIVER_PRESET,
    GPU_DRIVER_MODES,
    MIG_BOOT_DISK_GIB,
)

DRIVER_PRESET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def preset_declares_gpus(preset: str) -> bool:
    """The original's check: a positive integer before the first `gpu-` (`8gpu-…` yes, `gpu-…` no)."""
    prefix = preset.split("gpu-", 1)[0] if preset else ""
    return prefix.isdigit() and int(prefix) > 0


def resolved_cpu_disk_gib(pool_disk_gib: int) -> int:
    """The CPU boot disk: the pool's own, else the default (spec/constants.py holds the disk defaults)."""
    return pool_disk_gib if pool_disk_gib > 0 else DEFAULT_CPU_DISK_GIB


def resolved_gpu_disk_gib(pool_disk_gib: int, gpu_disk_size_gib: int, mig_enabled: bool) -> int:
    """The GPU boot disk (rendered and budgeted): the pool's own, else 128 under MIG, else
    `gpu_disk_size_gib` (the cluster's, by default 1023)."""
    if pool_disk_gib > 0:
        return pool_disk_gib
    return MIG_BOOT_DISK_GIB if mig_enabled else gpu_disk_size_gib


def _is_sxm_or_nvl(platform: str) -> bool:
    normalized = platform.strip().lower()
    return "-sxm" in normalized or "-nvl" in normalized


def is_fabric_capable_topology(platform: str, preset: str) -> bool:
    """Exactly 8 GPUs per node on an SXM/NVL platform: the only shapes that can join an InfiniBand fabric."""
    return gpus_per_node(preset) == 8 and _is_sxm_or_nvl(platform)


def is_nvswitch_topology(*, gpu_count: int, platform: str, preset: str, gpu_cluster: bool) -> bool:
    """GPUs behind NVSwitch: a GPU cluster, or more than one GPU per node on an SXM/NVL platform."""
    if gpu_count <= 0:
        return False
    return gpu_cluster or (gpus_per_node(preset) > 1 and _is_sxm_or_nvl(platform))


@dataclass(frozen=True)
class DriverSelection:
    """The resolved GPU driver strategy of one cluster."""

    requested_mode: str
    effective_mode: str
    managed_driver_preset: str
    gpu_enabled: bool
    nvswitch: bool
    unsafe_operator_acknowledged: bool

    @property
    def uses_managed_image(self) -> bool:
        return self.gpu_enabled and self.effective_mode == "managed-image"


def resolve_driver(
    *,
    gpu_count: int,
    platform: str,
    preset: str,
    mode: str,
    managed_driver_preset: str,
    gpu_cluster: bool,
    allow_unsafe_nvswitch_operator: bool,
) -> DriverSelection:
    """`auto` with GPUs becomes managed-image; CPU-only clusters keep the requested mode (it is inert)."""
    requested = (mode or "auto").strip().lower()
    gpu_enabled = gpu_count > 0
    nvswitch = is_nvswitch_topology(
        gpu_count=gpu_count, platform=platform, preset=preset, gpu_cluster=gpu_cluster
    )
    effective = "managed-image" if gpu_enabled and requested == "auto" else requested
    return DriverSelection(
        requested_mode=requested,
        effective_mode=effective,
        managed_driver_preset=(managed_driver_preset or DEFAULT_MANAGED_DRIVER_PRESET).strip(),
        gpu_enabled=gpu_enabled,
        nvswitch=nvswitch,
        unsafe_operator_acknowledged=gpu_enabled
        and effective == "operator"
        and nvswitch
        and allow_unsafe_nvswitch_operator,
    )


def driver_problems(
    selection: DriverSelection, *, allow_unsafe_nvswitch_operator: bool
) -> list[tuple[str, str, str]]:
    """(field, message, hint) for an unusable driver strategy."""
    problems: list[tuple[str, str, str]] = []
    if selection.requested_mode not in GPU_DRIVER_MODES:
        problems.append(
            (
                "gpu_driver_mode",
                f"unsupported GPU driver mode {selection.requested_mode!r}",
                "expected one of: " + ", ".join(GPU_DRIVER_MODES),
            )
        )
    if not DRIVER_PRESET_RE.fullmatch(selection.managed_driver_preset):
        problems.append(
            (
                "managed_driver_preset",
                "managed GPU driver preset must start with a letter or digit and contain only letters, "
                "digits, '.', '_' or '-'",
                f"for example {DEFAULT_MANAGED_DRIVER_PRESET!r}",
            )
        )
    if (
        selection.gpu_enabled
        and selection.effective_mode == "operator"
        and selection.nvswitch
        and not allow_unsafe_nvswitch_operator
    ):
        problems.append(
            (
                "gpu_driver_mode",
                "GPU driver mode 'operator' is unsafe for this NVSwitch topology: the in-cluster driver and "
                "Fabric Manager can race host InfiniBand device creation",
                "use 'auto' or 'managed-image'; for a controlled diagnostic only, set "
                "allow_unsafe_nvswitch_operator: true",
            )
        )
    return problems
