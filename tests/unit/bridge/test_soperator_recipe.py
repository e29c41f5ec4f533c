"""The soperator recipe's sources and layout: the upstream library is materialized keeping
`soperator/installations/example` next to `soperator/modules` (the installation reaches its modules by
relative path) and the installation's Terraform state survives a re-materialize; its variable surface is
checked (a missing variable is named); identity reaches it under its own names."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_pulumi.bridge import soperator_recipe as sr
from npa_pulumi.bridge.recipe import RecipeSource
from npa_pulumi.errors import UserInputError
from npa_pulumi.plan.recipe_surface import read_recipe_variables


def _library(root: Path, skip: str = "") -> Path:
    example = root / "soperator" / "installations" / "example"
    example.mkdir(parents=True)
    names = [*sr.IDENTITY_VARIABLES, *sr.RENDERED_VARIABLES, *sr.RUNTIME_VARIABLES]
    example.joinpath("variables.tf").write_text(
        "".join(f'variable "{n}" {{\n  type = any\n}}\n' for n in dict.fromkeys(names) if n != skip)
    )
    example.joinpath("main.tf").write_text('module "k8s" {\n  source = "../../modules/k8s"\n}\n')
    modules = root / "soperator" / "modules" / "k8s"
    modules.mkdir(parents=True)
    modules.joinpath("main.tf").write_text("# the module\n")
    return root


def test_the_library_layout_is_kept_and_state_survives(tmp_path: Path) -> None:
    library = _library(tmp_path / "lib")
    work = tmp_path / "work"
    source = RecipeSource("dir", str(library))
    recipe = sr.materialize(source, work, "eu-north1", tmp_path / "cache")
    assert recipe.module_dir == work / sr.INSTALLATION
    assert (work / "soperator" / "modules" / "k8s" / "main.tf").is_file()
    assert (recipe.module_dir / "npa_provider_domain_override.tf").exists() is False  # no provider block
    assert recipe.warnings  # ... which is said loudly
    (recipe.module_dir / "terraform.tfstate").write_text("{}")
    again = sr.materialize(source, work, "eu-north1", tmp_path / "cache")
    assert (recipe.module_dir / "terraform.tfstate").read_text() == "{}"
    assert again.digest == recipe.digest  # Terraform's own files are not the recipe


def test_a_missing_variable_is_named(tmp_path: Path) -> None:
    library = _library(tmp_path / "lib", skip="filestore_jail")
    recipe = sr.materialize(RecipeSource("dir", str(library)), tmp_path / "work", "us-central1", tmp_path)
    declared = read_recipe_variables(recipe.module_dir)
    assert sr.missing_variables(declared, accounting=False) == ["filestore_jail"]
    assert sr.missing_variables(declared, accounting=True) == [
        "filestore_jail",
        "filestore_accounting",
        "slurm_nodeset_accounting",
    ]


def test_the_shipped_stand_in_declares_everything_the_payload_needs() -> None:
    declared = read_recipe_variables(sr.stand_in_dir())
    assert sr.missing_variables(declared, accounting=True) == []


def test_sources_and_identity_names() -> None:
    assert sr.resolve_source("local").kind == "local-stand-in"
    assert sr.resolve_source("nebius", recipe_ref="main").location.endswith("@main")
    with pytest.raises(UserInputError, match="--soperator-recipe-dir"):
        sr.resolve_source("nebius")
    identity = {
        "tenant_id": "t",
        "parent_id": "p",
        "region": "r",
        "subnet_id": "vpcsubnet-1",
        "iam_token": "x",
    }
    assert sr.recipe_identity(identity) == {
        "iam_tenant_id": "t",
        "o11y_iam_tenant_id": "t",
        "iam_project_id": "p",
        "o11y_iam_project_id": "p",
        "region": "r",
        "vpc_subnet_id": "vpcsubnet-1",
        "iam_token": "x",
    }
