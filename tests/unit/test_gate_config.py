"""The gate's settings travel typed from the plan to the component and cross the Pulumi boundary as plain
JSON (`GateConfig.to_inputs`), in the shape stack state has always held: required fields, optional ones
only when set (the graphics smoke's two always)."""

from __future__ import annotations

import json

from npa_pulumi.kube.gpu_health.config import GateConfig

BASE = GateConfig(
    expected_nodes=3,
    expected_gpu_nodes=2,
    gpus_per_node=8,
    gpu_platform="gpu-h200-sxm",
    driver_mode="managed-image",
    nvswitch=True,
    stabilization_s=120.0,
    timeout_s=3600.0,
    cuda_smoke=True,
    smoke_image="cuda:vectoradd",
)


def test_stored_inputs_keep_the_shape_of_the_state() -> None:
    stored = BASE.to_inputs()
    assert set(stored) == {
        "expected_nodes",
        "expected_gpu_nodes",
        "gpus_per_node",
        "gpu_platform",
        "driver_mode",
        "nvswitch",
        "stabilization_s",
        "timeout_s",
        "cuda_smoke",
        "smoke_image",
        "graphics_smoke",
        "graphics_image",
    }
    assert json.loads(json.dumps(stored)) == stored  # plain JSON


def test_optional_settings_are_stored_only_when_set() -> None:
    mig = GateConfig(
        **{
            **BASE.to_inputs(),
            "mig_resources": {"nvidia.com/gpu": 0},
            "mig_strategy": "mixed",
            "mig_config": "c",
        }
    )
    stored = mig.to_inputs()
    assert stored["mig_resources"] == {"nvidia.com/gpu": 0} and stored["mig_strategy"] == "mixed"
    assert "mig_versions" not in stored and "poll_s" not in stored and "smoke_namespace" not in stored


def test_settings_round_trip_through_stored_inputs() -> None:
    config = GateConfig(**{**BASE.to_inputs(), "driver_repo_configmap": "repos", "driver_repositories": {}})
    assert GateConfig.from_inputs(config.to_inputs()) == config
    assert GateConfig.from_inputs(BASE.to_inputs()) == BASE
