"""Project identity is checked for the whole fleet in preflight, before anything mutates (issue 57 item 5):
a project of another tenant in a three-project fleet makes `preflight` and `up` exit 1 naming it, and `up`
creates nothing, not even the projects listed before it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import REPO, inventory, npa, write_spec

pytestmark = pytest.mark.integration

NO_KUBE = {"NPA_LOCAL_CLOUD_KUBERNETES_API": "0"}
FOREIGN = """
  - id: project-foreign1
    name: foreign
    region: us-central1
    tenant_id: tenant-elsewhere
"""
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: ident
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - name: fresh
  - project_id: project-existing1
  - project_id: project-foreign1
"""


def _tenant(tmp_path: Path) -> Path:
    fixture = tmp_path / "tenant.yaml"
    fixture.write_text((REPO / "examples" / "local-tenant.yaml").read_text() + FOREIGN)
    return fixture


def test_a_wrong_tenant_project_fails_preflight_and_nothing_is_created(
    isolated_home: Path, tmp_path: Path
) -> None:
    npa("local-cloud", "init", "--tenant-fixture", str(_tenant(tmp_path)), env=NO_KUBE, check=True)
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    before = inventory(env=NO_KUBE)

    checked = npa("preflight", "--spec", str(spec), "--output", "json", env=NO_KUBE)
    assert checked.code == 1, checked.stderr[-2000:]
    errors = checked.json()["errors"]
    assert [e for e in errors if "project-foreign1" in e and "tenant-local" in e], errors
    assert not [e for e in errors if "project-existing1" in e or "'fresh'" in e], errors

    result = npa("up", "--spec", str(spec), "--yes", "--output", "json", env=NO_KUBE)
    assert result.code == 1, result.stderr[-2000:]
    document = result.json()
    assert document["preflight"]["ok"] is False
    assert [e for e in document["preflight"]["errors"] if "project-foreign1" in e]
    after = inventory(env=NO_KUBE)
    assert after == before  # the project listed first ('fresh') was not created either
