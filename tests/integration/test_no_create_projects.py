"""`up --no-create-projects` with a named project that does not exist aborts the whole run before any
project, bucket, subnet or cluster is touched — the other projects' stacks do not run either."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import inventory, npa, write_spec

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: nocreate
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
    object_storage: {enabled: true, storage_class: standard, size_gibibytes: 16}
  - name: existing          # the local tenant fixture's project of that name
  - name: ghost
"""


def test_a_missing_project_aborts_the_whole_run(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)
    before = inventory()
    result = npa("up", "--spec", str(spec), "--no-create-projects", "--yes", "--output", "json")
    assert result.code == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    document = result.json()
    assert document["ok"] is False
    assert "ghost" in document["error"] and "--no-create-projects" in document["error"]
    assert "'existing'" not in document["error"]  # only the missing one is named
    assert document["stacks"] == []
    assert inventory() == before  # no project, bucket, network, subnet or cluster
    assert not (isolated_home / ".npa-pulumi" / "state" / ".pulumi" / "stacks").exists()
