"""A recipe whose modules require a newer terraform than the one that would run is refused at plan time,
naming the constraint, the binary and NPA_TERRAFORM_BIN, before any project stack (or anything in the
tenant) changes: terraform itself would refuse only at the cluster stack's `init`, after the project stack
had created the project, its network and its bucket."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import inventory, npa, write_spec
from upstream_library import writable_copy

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: tfversion
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - name: fresh
    object_storage: {enabled: true, storage_class: standard, size_gibibytes: 16}
"""


def _recipe_requiring(tmp_path: Path, constraint: str) -> Path:
    """A copy of upstream whose one `required_version` (a module k8s-training calls) asks for more."""
    library = writable_copy(tmp_path / "recipe")
    versions = library / "modules" / "k8s-rbac-bindings" / "provider.tf"
    text = versions.read_text()
    assert 'required_version = ">= 1.11.0"' in text
    versions.write_text(text.replace('">= 1.11.0"', f'"{constraint}"'))
    return library


@pytest.mark.parametrize("command", ["up", "preview", "preflight"])
def test_a_recipe_requiring_a_newer_terraform_is_refused_before_anything_changes(
    isolated_home: Path, tmp_path: Path, command: str
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    recipe = _recipe_requiring(tmp_path, ">= 99.0")
    npa("local-cloud", "init", check=True)
    before = inventory()
    extra = ["--yes"] if command == "up" else []
    result = npa(command, "--spec", str(spec), "--recipe-dir", str(recipe), *extra, "--output", "json")
    assert result.code == 1, result.stderr[-3000:] + result.stdout[-3000:]
    assert "Traceback" not in result.stderr
    error = result.json()["error"]
    assert error["kind"] == "terraform-version", error
    message = error["message"]
    assert '">= 99.0" (modules/k8s-rbac-bindings/provider.tf)' in message, message
    assert "NPA_TERRAFORM_BIN" in message
    assert "OpenTofu" in message or "Terraform" in message
    assert inventory() == before  # no project, bucket, network or cluster
    assert not (isolated_home / ".npa-pulumi" / "state" / ".pulumi" / "stacks").exists()
