"""The one reading of a Nebius preset name (`8gpu-128vcpu-1600gb`): GPUs, vCPUs and memory per node.

In `runtime` (the bottom layer) so that everything that needs it shares it: the spec's effective values,
planning, preflight, the engine and the policy pack, which may import nothing but `runtime`.
"""

from __future__ import annotations

import re

_GPUS_RE = re.compile(r"^(\d+)gpu-")
_VCPUS_RE = re.compile(r"(\d+)vcpu")
_MEMORY_RE = re.compile(r"(\d+)gb")


def gpus_per_node(preset: str) -> int:
    """GPUs per node encoded by a preset (`8gpu-128vcpu-1600gb` → 8), 0 when none."""
    match = _GPUS_RE.match(preset.strip().lower())
    return int(match.group(1)) if match else 0


def vcpus_per_node(preset: str) -> int:
    """vCPUs per node: the first `<N>vcpu` in the preset, 0 when none (an empty preset)."""
    match = _VCPUS_RE.search(preset.lower())
    return int(match.group(1)) if match else 0


def memory_gib_per_node(preset: str) -> int:
    """Memory per node in GiB: the first `<N>gb` in the preset, 0 when none."""
    match = _MEMORY_RE.search(preset.lower())
    return int(match.group(1)) if match else 0
