"""A soperator target's plan: the recipe's tfvars (identity never among them, the backups password only at
run time), the Slurm gate's settings and its lifecycle state, and `--no-health-gate` skipping the gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.bridge import soperator_recipe
from npa_pulumi.bridge.recipe import RecipeSource
from npa_pulumi.engine.backends.base import PlanInputs
from npa_pulumi.engine.backends.soperator import SoperatorBackend
from npa_pulumi.plan import Target, resolve_targets
from npa_pulumi.spec import parse_spec
from npa_pulumi.spec.constants import BackendKind

SPEC = {
    "name": "f",
    "region": "us-central1",
    "projects": [
        {
            "name": "p",
            "clusters": [
                {
                    "name": "slurm",
                    "backend": "soperator",
                    "soperator": {
                        "gate_timeout_minutes": 5,
                        "workers": [
                            {"name": "cpu", "size": 2},
                            {
                                "name": "gpu",
                                "platform": "gpu-h200-sxm",
                                "preset": "8gpu-128vcpu-1600gb",
                                "size": 1,
                                "fabric": "fabric-3",
                            },
                        ],
                    },
                }
            ],
        }
    ],
}


@pytest.fixture
def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Target:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "home"))
    [found] = resolve_targets(parse_spec(json.dumps(SPEC)))
    return found


def _inputs(health_gate: bool = True) -> PlanInputs:
    stand_in = RecipeSource("local-stand-in", str(soperator_recipe.stand_in_dir()))
    return PlanInputs(
        "tenant-1", "ssh-ed25519 AAAA k", True, health_gate, sources={BackendKind.SOPERATOR: stand_in}
    )


def test_the_plan_renders_the_recipe_and_the_gate(target: Target) -> None:
    inputs = _inputs()
    plan = SoperatorBackend().plan(target, inputs)
    assert inputs.problems == []  # the stand-in declares every variable
    assert plan.module_kind == "soperator" and plan.backend == "soperator" and plan.has_gpus
    assert plan.tfvars["slurm_login_ssh_root_public_keys"] == ["ssh-ed25519 AAAA k"]
    assert "backups_password" not in plan.tfvars and "backups_password" in plan.runtime_tfvars
    assert not set(soperator_recipe.IDENTITY_VARIABLES) & set(plan.tfvars)
    assert plan.backend_gate is not None and plan.backend_gate.to_inputs() == {
        "name": "soperator",
        "namespace": "soperator",
        "nodesets": {"cpu": 2, "gpu": 1},
        "timeout_s": 300.0,
        "accounting": False,
    }
    gate = plan.health_gate
    assert gate is not None
    # every node: system 3, controller 1, login 1, workers 2 + 1; the GPU checks on the one GPU worker
    assert (gate.expected_nodes, gate.expected_gpu_nodes, gate.gpus_per_node) == (8, 1, 8)
    assert SoperatorBackend().gate_state(plan) == "validating-slurm"


def test_no_health_gate_skips_the_slurm_gate(target: Target) -> None:
    plan = SoperatorBackend().plan(target, _inputs(health_gate=False))
    assert plan.backend_gate is None and plan.health_gate is None
    assert SoperatorBackend().gate_state(plan) == ""


def test_object_storage_only_soperator_clusters_would_use_is_named_for_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from npa_pulumi.engine.backends.base import PlanSettings
    from npa_pulumi.engine.backends.registry import backend_for
    from npa_pulumi.engine.plans import UnusedStorage, build_plans

    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "home"))
    storage = {"enabled": True, "storage_class": "standard", "size_gibibytes": 16}
    data: Any = json.loads(json.dumps(SPEC))
    data["projects"][0]["object_storage"] = storage
    spec = parse_spec(json.dumps(data))
    plans = build_plans(
        spec, resolve_targets(spec), PlanSettings(), "tenant-1", False, backend_for=backend_for
    )
    assert plans.unused_storage == [UnusedStorage(0, (BackendKind.SOPERATOR,))]
    assert [p.stack for p in plans.projects] == [
        "f.p"
    ]  # planned (and refused by up/preview before any change)
