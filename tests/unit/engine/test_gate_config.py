"""The gate's settings travel typed from the plan to the component and cross the Pulumi boundary as plain
JSON (`GateConfig.to_inputs`), in the shape stack state has always held: required fields, optional ones
only when set (the graphics smoke's two always)."""

from __future__ import annotations

import json

from npa_pulumi.kube.gpu_health.config import GateConfig
from npa_pulumi.spec.constants import BackendKind

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


def test_a_typed_gate_keeps_the_fingerprint_of_the_stored_settings() -> None:
    """A deployed stack's fingerprint was taken over its plan with the gate's settings as JSON: the typed
    settings hash the same, so `up` after an upgrade still skips an unchanged stack."""
    import dataclasses
    from typing import Any

    from npa_pulumi.engine.fingerprint import fingerprint
    from npa_pulumi.engine.programs import ClusterPlan

    plan = ClusterPlan(
        fleet="f",
        project_key="p",
        project_stack="f.p",
        cluster_name="c",
        stack="f.p.c",
        region="r",
        tenant_id="t",
        backend=BackendKind.MK8S,
        health_gate=BASE,
    )
    stored: Any = BASE.to_inputs()
    as_json = dataclasses.replace(plan, health_gate=stored)
    versions = {"npa": "0.1.0", "engine": "3.259.0"}
    assert fingerprint(plan, "local", "", versions) == fingerprint(as_json, "local", "", versions)
    changed = dataclasses.replace(plan, health_gate=dataclasses.replace(BASE, timeout_s=60.0))
    assert fingerprint(changed, "local", "", versions) != fingerprint(plan, "local", "", versions)
