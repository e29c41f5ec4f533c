"""The Nebius API domain of a real recipe follows the region through a Terraform override file (upstream
files stay as they are), and a recipe where there is nothing to point is reported loudly, never silently."""

from __future__ import annotations

from pathlib import Path

import pytest
from upstream_library import upstream_library, writable_copy

from npa_pulumi.bridge.recipe import (
    DOMAIN_OVERRIDE_FILE,
    RecipeSource,
    materialize,
    resolve_source,
)

V4 = upstream_library()
VARIABLES = 'variable "region" {\n  type = string\n}\n'


def recipe(tmp_path: Path, provider: str) -> Path:
    root = tmp_path / "library" / "k8s-training"
    root.mkdir(parents=True)
    (root / "variables.tf").write_text(VARIABLES)
    (root / "provider.tf").write_text(provider)
    return root.parent


def prepare(library: Path, tmp_path: Path, region: str) -> tuple[Path, list[str]]:
    prepared = materialize(RecipeSource("dir", str(library)), tmp_path / "work", region, tmp_path / "cache")
    return prepared.module_dir, prepared.warnings


V1_PROVIDER = """\
terraform {
  required_providers {
    nebius = { source = "terraform-provider.storage.eu-north1.nebius.cloud/nebius/nebius" }
  }
}

provider "nebius" {
  domain = "api.eu.nebius.cloud:443"
}
"""


@pytest.mark.parametrize(
    ("region", "domain"),
    [("us-central1", "api.nebius.cloud:443"), ("eu-north1", "api.eu.nebius.cloud:443")],
)
def test_domain_is_set_by_an_override_file(tmp_path: Path, region: str, domain: str) -> None:
    library = recipe(tmp_path, V1_PROVIDER)
    module_dir, warnings = prepare(library, tmp_path, region)
    assert warnings == []
    assert (module_dir / "provider.tf").read_text() == V1_PROVIDER  # the upstream file is untouched
    override = (module_dir / DOMAIN_OVERRIDE_FILE).read_text()
    assert 'provider "nebius" {' in override and f'domain = "{domain}"' in override


def test_a_block_without_a_domain_gets_one(tmp_path: Path) -> None:
    library = recipe(tmp_path, 'provider "nebius" {\n  profile = {}\n}\n')
    module_dir, warnings = prepare(library, tmp_path, "us-central1")
    assert warnings == []
    assert 'domain = "api.nebius.cloud:443"' in (module_dir / DOMAIN_OVERRIDE_FILE).read_text()


def test_the_override_follows_a_region_change_and_goes_with_the_block(tmp_path: Path) -> None:
    library = recipe(tmp_path, V1_PROVIDER)
    module_dir, _ = prepare(library, tmp_path, "eu-north1")
    module_dir, _ = prepare(library, tmp_path, "us-central1")
    assert 'domain = "api.nebius.cloud:443"' in (module_dir / DOMAIN_OVERRIDE_FILE).read_text()
    (library / "k8s-training" / "provider.tf").write_text("terraform {}\n")
    module_dir, warnings = prepare(library, tmp_path, "us-central1")
    assert not (module_dir / DOMAIN_OVERRIDE_FILE).exists()  # an override of nothing is a Terraform error
    assert warnings


@pytest.mark.parametrize(
    "provider",
    [
        "terraform {}\n",  # V4: no nebius provider block at all
        'provider "nebius" {\n  alias  = "eu"\n  domain = "api.eu.nebius.cloud:443"\n}\n',
    ],
)
def test_nothing_to_point_is_a_loud_warning(tmp_path: Path, provider: str) -> None:
    library = recipe(tmp_path, provider)
    module_dir, warnings = prepare(library, tmp_path, "us-central1")
    [warning] = warnings
    assert warning.startswith("WARNING:") and "api.nebius.cloud:443" in warning
    assert 'provider "nebius"' in warning
    assert not (module_dir / DOMAIN_OVERRIDE_FILE).exists()


def test_the_upstream_v4_surface_warns(tmp_path: Path) -> None:
    writable_copy(tmp_path / "v4")
    _, warnings = prepare(tmp_path / "v4", tmp_path, "eu-north1")
    assert len(warnings) == 1 and "api.eu.nebius.cloud:443" in warnings[0]


def test_the_local_cloud_s_recipe_is_prepared_as_on_nebius(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --cloud local deploys the default recipe (upstream + the fleet's override files): the same files,
    # domain override included, as a Nebius deployment; the local providers ignore the domain.
    monkeypatch.setenv("NPA_K8S_TRAINING_MIRROR", str(V4))
    monkeypatch.delenv("NPA_LOCAL_CLOUD_RECIPE", raising=False)
    prepared = materialize(resolve_source("local"), tmp_path / "work", "us-central1", tmp_path / "cache")
    assert prepared.warnings == []
    assert 'domain = "api.nebius.cloud:443"' in (prepared.module_dir / DOMAIN_OVERRIDE_FILE).read_text()
