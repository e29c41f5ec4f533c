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


# ---- the payload variables the original validates and renders (use_default_apparmor_profile,
# slurm_rest_enabled, node_group_version): rendered where the recipe declares them


def _target_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **payload: Any) -> Target:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "home"))
    data: Any = json.loads(json.dumps(SPEC))
    data["projects"][0]["clusters"][0]["soperator"].update(payload)
    [found] = resolve_targets(parse_spec(json.dumps(data)))
    return found


NEWEST = {
    "use_default_apparmor_profile": True,
    "slurm_operator_version": "4.1.7",
    "accounting": True,
    "slurm_rest_enabled": True,
    "node_group_version": "1.30",
}
PAYLOAD_VARIABLES = ("use_default_apparmor_profile", "slurm_rest_enabled", "node_group_version")


def _recipe_declaring_them(tmp_path: Path) -> RecipeSource:
    """The stand-in's surface plus the three variables, as the newest upstream installation declares them
    (k8s-training-recipe.md section 7: `node_group_version`, `use_default_apparmor_profile`, REST toggles)."""
    import shutil

    recipe = tmp_path / "newest-soperator"
    shutil.copytree(soperator_recipe.stand_in_dir(), recipe)
    (recipe / "payload_variables.tf").write_text(
        'variable "use_default_apparmor_profile" {\n  type    = bool\n  default = false\n}\n'
        'variable "slurm_rest_enabled" {\n  type    = bool\n  default = true\n}\n'
        'variable "node_group_version" {\n  type = string\n}\n'
    )
    return RecipeSource("dir", str(recipe))


def test_a_recipe_that_declares_them_gets_the_payloads_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = _target_with(tmp_path, monkeypatch, **NEWEST)
    inputs = _inputs()
    inputs.sources[BackendKind.SOPERATOR] = _recipe_declaring_them(tmp_path)
    plan = SoperatorBackend().plan(target, inputs)
    assert inputs.problems == []
    assert {k: plan.tfvars[k] for k in PAYLOAD_VARIABLES} == {
        "use_default_apparmor_profile": True,
        "slurm_rest_enabled": True,
        "node_group_version": "1.30",
    }
    assert plan.tfvars["slurm_operator_version"] == "4.1.7"
    # The defaults: the profile and REST off, written as such; an unset node_group_version is the recipe's.
    plain = _target_with(tmp_path / "plain", monkeypatch)
    inputs = _inputs()
    inputs.sources[BackendKind.SOPERATOR] = _recipe_declaring_them(tmp_path / "plain")
    plan = SoperatorBackend().plan(plain, inputs)
    assert inputs.problems == []
    assert (plan.tfvars["use_default_apparmor_profile"], plan.tfvars["slurm_rest_enabled"]) == (False, False)
    assert "node_group_version" not in plan.tfvars


def test_a_recipe_without_them_is_refused_only_when_the_payload_needs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in (recipe 1.20.1's surface) declares none of the three: the defaults need none of them
    and render none; the payload that asks for the profile, REST and a pinned node-group version names
    each variable the recipe lacks, before any change."""
    plan = SoperatorBackend().plan(_target_with(tmp_path, monkeypatch), inputs := _inputs())
    assert inputs.problems == [] and not set(PAYLOAD_VARIABLES) & set(plan.tfvars)
    SoperatorBackend().plan(_target_with(tmp_path / "newest", monkeypatch, **NEWEST), inputs := _inputs())
    (problem,) = inputs.problems
    assert problem.endswith(
        "does not declare use_default_apparmor_profile, slurm_rest_enabled, node_group_version, which the "
        "soperator payload needs"
    )
