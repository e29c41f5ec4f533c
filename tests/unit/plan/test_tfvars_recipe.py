"""Reading which variables a recipe declares (python-hcl2), and the default recipe's surface (the real
upstream module with the fleet's override files) against what the renderer emits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from upstream_library import upstream_library

from npa_pulumi.bridge.recipe import MIRROR_ENV, default_source, materialize
from npa_pulumi.plan import (
    IDENTITY_VARIABLES,
    MIG_RECIPE_VARIABLES,
    RECIPE_VARIABLES,
    RecipeError,
    read_recipe_variables,
    render_tfvars,
    resolve_targets,
)
from npa_pulumi.spec import load_spec

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

VARIABLES_TF = """
variable "cluster_name" {
  type    = string
  default = "k8s-training"
}

variable "loki" {
  type = object({ enabled = optional(bool, false), replication_factor = optional(number) })
}

variable gpu_nodes_preset {
  type = string
}

output "not_a_variable" { value = 1 }
"""


def test_reads_hcl_variable_blocks(tmp_path: Path) -> None:
    (tmp_path / "variables.tf").write_text(VARIABLES_TF)
    (tmp_path / "more.tf").write_text('variable "enable_filestore" {\n  type = bool\n}\n')
    assert read_recipe_variables(tmp_path) == {"cluster_name", "loki", "gpu_nodes_preset", "enable_filestore"}


def test_reads_a_checkout_holding_k8s_training(tmp_path: Path) -> None:
    module = tmp_path / "k8s-training"
    module.mkdir()
    (module / "variables.tf").write_text(VARIABLES_TF)
    assert "loki" in read_recipe_variables(tmp_path)


def test_reads_tf_json(tmp_path: Path) -> None:
    (tmp_path / "variables.tf.json").write_text(json.dumps({"variable": {"region": {"type": "string"}}}))
    assert read_recipe_variables(tmp_path) == {"region"}


def test_malformed_hcl_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "variables.tf").write_text('variable "x" {\n')
    with pytest.raises(RecipeError, match=r"variables\.tf"):
        read_recipe_variables(tmp_path)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="not found"):
        read_recipe_variables(tmp_path / "nope")


def test_directory_without_terraform(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("hi")
    with pytest.raises(RecipeError, match="no Terraform files"):
        read_recipe_variables(tmp_path)


def test_the_default_recipe_declares_identity_and_every_setting_the_examples_carry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    monkeypatch.setenv(MIRROR_ENV, str(upstream_library()))
    declared = materialize(default_source(), tmp_path / "work", "eu-north1", tmp_path / "cache").variables
    assert set(IDENTITY_VARIABLES) <= declared
    overridden = {
        "gpu_operator_rtx_driver_profile",
        "gpu_nodes_driver_preset",
    }  # override files declare these
    assert set(MIG_RECIPE_VARIABLES) | overridden <= declared
    # What upstream leaves undeclared the renderer may only leave out (its value is the module's default):
    # every example spec renders against the real surface, which would raise otherwise.
    undeclared = set(RECIPE_VARIABLES) - declared
    rendered = 0
    for spec_path in sorted(EXAMPLES.glob("*.yaml")):
        if "apiVersion: npa.fleet/" not in spec_path.read_text():
            continue
        for target in resolve_targets(load_spec(spec_path)):
            if target.backend == "mk8s":
                assert set(render_tfvars(target, declared).omitted) <= undeclared, spec_path.name
                rendered += 1
    assert rendered
