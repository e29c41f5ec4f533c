"""One reading of a preset name (npa_pulumi/runtime/presets.py), shared by the spec, planning, preflight,
the engine and the policy pack: they cannot disagree about how many GPUs a node has."""

from __future__ import annotations

import pytest

from npa_pulumi.policies.fleet_guardrails_lib import values as pack_values
from npa_pulumi.runtime import presets
from npa_pulumi.spec import effective


@pytest.mark.parametrize(
    ("preset", "gpus", "vcpus", "memory"),
    [
        ("8gpu-128vcpu-1600gb", 8, 128, 1600),
        ("1gpu-16vcpu-200gb", 1, 16, 200),
        (" 8GPU-128vCPU-1600GB ", 8, 128, 1600),  # as a person may write it
        ("4vcpu-16gb", 0, 4, 16),
        ("gpu-8vcpu-32gb", 0, 8, 32),  # no count before `gpu-`: no GPUs
        ("", 0, 0, 0),
    ],
)
def test_every_reader_counts_the_same(preset: str, gpus: int, vcpus: int, memory: int) -> None:
    assert presets.gpus_per_node(preset) == gpus
    assert (presets.vcpus_per_node(preset), presets.memory_gib_per_node(preset)) == (vcpus, memory)
    assert pack_values.gpus_per_node(preset) == (gpus or None)  # the pack's None: no GPU count
    assert effective.preset_declares_gpus(preset.strip().lower()) == (gpus > 0)
