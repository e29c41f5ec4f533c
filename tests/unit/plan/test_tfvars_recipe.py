"""Reading which variables a recipe declares (python-hcl2), and the shipped stand-in's surface."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npa_pulumi.plan import (
    IDENTITY_VARIABLES,
    RECIPE_VARIABLES,
    RecipeError,
    default_recipe_variables,
    read_recipe_variables,
    shipped_recipe_dir,
)

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


def test_shipped_stand_in_declares_the_full_surface_and_identity() -> None:
    recipe = shipped_recipe_dir()
    assert recipe is not None, "recipes/local-k8s-training/variables.tf is the default recipe"
    declared = read_recipe_variables(recipe)
    assert set(RECIPE_VARIABLES) <= declared, sorted(set(RECIPE_VARIABLES) - declared)
    assert set(IDENTITY_VARIABLES) <= declared
    assert default_recipe_variables() == declared
