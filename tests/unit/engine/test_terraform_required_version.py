"""The recipe's `required_version` constraints (every module's) against the binary that would run them:
read from the materialized recipe, checked by the binary's own version line (terraform or OpenTofu)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from upstream_library import upstream_library

from npa_pulumi.bridge.recipe import MIRROR_ENV, RecipeSource, default_source, materialize
from npa_pulumi.bridge.versions import (
    TerraformRelease,
    TerraformVersionRefused,
    VersionConstraint,
    required_versions,
    terraform_release,
    unmet_constraints,
)
from npa_pulumi.engine.plans import FleetPlans, require_recipe_terraform


@pytest.mark.parametrize(
    ("expression", "version", "allowed"),
    [
        (">= 1.12", (1, 12, 0), True),
        (">= 1.12", (1, 11, 9), False),
        (">= 1.12.0", (1, 10, 6), False),
        (">=1.5.0", (1, 10, 6), True),
        ("~> 1.12", (1, 99, 0), True),
        ("~> 1.12", (2, 0, 0), False),
        ("~> 1.12.0", (1, 12, 7), True),
        ("~> 1.12.0", (1, 13, 0), False),
        (">= 1.9, < 2.0", (1, 10, 6), True),
        (">= 1.9, < 1.10", (1, 10, 6), False),
        ("1.10.6", (1, 10, 6), True),
        ("!= 1.10.6", (1, 10, 6), False),
    ],
)
def test_constraints_follow_terraform_syntax(
    expression: str, version: tuple[int, int, int], allowed: bool
) -> None:
    assert VersionConstraint(expression, "k8s-training/versions.tf").allows(version) is allowed


def test_an_unreadable_constraint_fails_closed(tmp_path: Path) -> None:
    release = _release(tmp_path, "Terraform v1.12.2", "1.12.2")
    unmet = unmet_constraints([VersionConstraint(">= latest", "k8s-training/versions.tf")], release)
    assert unmet and "cannot read" in unmet[0]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_every_module_of_the_recipe_is_read(tmp_path: Path) -> None:
    library = tmp_path / "library"
    _write(
        library / "k8s-training" / "main.tf", 'terraform {\n  required_providers {}\n}\nlocals { a = "b" }\n'
    )
    _write(
        library / "modules" / "cloud-init" / "versions.tf",
        'terraform {\n  required_version = ">= 1.12"\n  required_providers {\n    x = {}\n  }\n}\n',
    )
    # Not a terraform block: a variable that happens to be called required_version is no constraint.
    _write(library / "k8s-training" / "variables.tf", 'variable "v" {\n  required_version = "9"\n}\n')
    _write(
        library / "k8s-training" / ".terraform" / "modules" / "x" / "v.tf",
        'terraform { required_version = "99" }',
    )
    recipe = materialize(
        RecipeSource("dir", str(library)), tmp_path / "work", "eu-north1", tmp_path / "cache"
    )
    assert recipe.modules_dir is not None
    assert required_versions([recipe.module_dir, recipe.modules_dir]) == [
        VersionConstraint(">= 1.12", "modules/cloud-init/versions.tf")
    ]


def test_the_default_recipe_declares_what_it_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Upstream k8s-training at the pinned commit: write-only arguments need 1.11, declared in one module
    # only; the root module and the fleet's override files declare none.
    monkeypatch.setenv(MIRROR_ENV, str(upstream_library()))
    recipe = materialize(default_source(), tmp_path / "work", "eu-north1", tmp_path / "cache")
    assert recipe.modules_dir is not None
    assert required_versions([recipe.module_dir, recipe.modules_dir]) == [
        VersionConstraint(">= 1.11.0", "modules/k8s-rbac-bindings/provider.tf")
    ]


def _fake_binary(path: Path, line: str, version: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = json.dumps({"terraform_version": version})
    script = f"#!/bin/sh\nif [ \"$2\" = -json ]; then echo '{document}'; exit 0; fi\n"
    path.write_text(script + f"printf '%s\\non linux_amd64\\n' '{line}'\n")
    path.chmod(0o755)
    return path


def _release(tmp_path: Path, line: str, version: str, name: str = "terraform") -> TerraformRelease:
    return terraform_release(_fake_binary(tmp_path / "bin" / name, line, version))


def test_the_binary_is_named_by_its_own_version_line(isolated_home: Path, tmp_path: Path) -> None:
    tofu = terraform_release(_fake_binary(tmp_path / "a" / "tofu", "OpenTofu v1.10.6", "1.10.6"))
    assert (tofu.product, tofu.version, tofu.line) == ("OpenTofu", (1, 10, 6), "OpenTofu v1.10.6")
    terraform = terraform_release(_fake_binary(tmp_path / "b" / "terraform", "Terraform v1.12.2", "1.12.2"))
    assert (terraform.product, terraform.version) == ("Terraform", (1, 12, 2))


def test_a_too_old_binary_is_refused_naming_constraint_binary_and_override(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = _fake_binary(tmp_path / "old" / "tofu", "OpenTofu v1.10.6", "1.10.6")
    monkeypatch.setenv("NPA_TERRAFORM_BIN", str(binary))
    plans = FleetPlans(
        clusters=[object()],  # type: ignore[list-item]
        terraform_constraints=[VersionConstraint(">= 1.12", "modules/cloud-init/versions.tf")],
    )
    with pytest.raises(TerraformVersionRefused) as refused:
        require_recipe_terraform(plans)
    message = str(refused.value)
    assert '">= 1.12" (modules/cloud-init/versions.tf)' in message
    assert "OpenTofu 1.10.6" in message and str(binary) in message and "OpenTofu v1.10.6" in message
    assert "NPA_TERRAFORM_BIN" in message and "nothing was created" in message
    plans.terraform_constraints = [VersionConstraint(">= 1.10.0", "modules/cloud-init/versions.tf")]
    assert require_recipe_terraform(plans) is not None
