"""An empty `region` (in the spec and its project) is resolved at deploy time from the profile's
configuration, as docs/spec.md promises: with `--cloud local`, the local tenant's first region."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import inventory, npa, write_spec

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: noregion
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - name: a
  - name: b
    region: eu-north1
"""


def test_empty_region_comes_from_the_profile(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    plan = npa("plan", "--spec", str(spec), "--output", "json")
    assert plan.code == 0, plan.stderr
    assert plan.json()["region"] is None  # offline: resolved at deploy time

    npa("local-cloud", "init", check=True)  # the default tenant: regions us-central1, eu-north1
    preflight = npa("preflight", "--spec", str(spec), "--output", "json")
    assert preflight.code == 0, preflight.stderr[-3000:]
    assert {r["region"] for r in preflight.json()["requirements"]} == {"us-central1", "eu-north1"}

    preview = npa("preview", "--spec", str(spec), "--output", "json")
    assert preview.code == 0, preview.stderr[-3000:]

    up = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert up.code == 0, up.stderr[-3000:]
    assert "region us-central1" in up.stderr  # said where the region came from
    regions = {p["name"]: p["region"] for p in inventory()["projects"]}
    assert regions["a"] == "us-central1"
    assert regions["b"] == "eu-north1"  # an explicit project region still wins

    gone = npa("destroy", "--spec", str(spec), "--yes", "--output", "json")
    assert gone.code == 0, gone.stderr[-3000:]
    assert inventory()["mk8s_clusters"] == []
