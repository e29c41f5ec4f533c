"""A preview of stacks provably unchanged runs no engine (issue 19), without losing what a preview must
show: drift behind the fleet's back, a changed policy pack or config, and the policies' own results."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import npa, write_spec

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: skip
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - project_id: project-existing1
    clusters:
      - name: kept
      - name: gone
"""
EXTRA_PACK = Path(__file__).parent / "support" / "extra_pack"


def _preview(spec: Path, *extra: str) -> dict[str, dict[str, Any]]:
    result = npa("preview", "--spec", str(spec), "--no-preflight", "--output", "json", *extra)
    assert result.code == 0, result.stderr[-3000:]
    return {s["stack"]: s for s in result.json()["stacks"]}


def _engine_previews(home: Path) -> set[str]:
    logs = home / ".npa-pulumi" / "logs" / "skip"
    found = {p.name.removesuffix(".preview.log") for p in logs.glob("*.preview.log")}
    for path in logs.glob("*.preview.log"):
        path.unlink()
    return found


def test_preview_skips_unchanged_stacks_but_not_drift_or_new_policies(
    isolated_home: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)
    up = npa("up", "--spec", str(spec), "--yes", "-j", "2", "--output", "json")
    assert up.code == 0, up.stderr[-3000:]
    deployed_policy = {s["stack"]: s["policy"] for s in up.json()["stacks"]}
    stacks = set(deployed_policy)
    _engine_previews(isolated_home)

    # Unchanged: no engine run, every stack "no-changes", with the policy results of the run that deployed it.
    same = _preview(spec)
    assert {s: v["status"] for s, v in same.items()} == dict.fromkeys(stacks, "no-changes")
    assert {s: v["policy"] for s, v in same.items()} == deployed_policy
    assert _engine_previews(isolated_home) == set()

    # Behind the fleet's back: one cluster deleted. Its preview runs and reports the drift; the other
    # stacks still skip.
    gone = next(s for s in same.values() if s["stack"].endswith(".gone"))
    shown = npa(
        "local-cloud", "api", "delete_cluster", "--args", json.dumps({"cluster_id": gone["cluster_id"]})
    )
    assert shown.code == 0, shown.stderr
    drifted = _preview(spec)
    item = drifted["skip.project-existing1.gone"]
    assert item["status"] == "changes" and item["drift"], item
    assert "deleted outside the fleet" in item["error"]
    assert _engine_previews(isolated_home) == {"skip.project-existing1.gone"}
    repaired = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert repaired.code == 0, repaired.stderr[-3000:]
    _engine_previews(isolated_home)

    # Another policy pack: every stack's preview runs the engine (and its policies) again.
    with_pack = _preview(spec, "--policy-pack", str(EXTRA_PACK))
    assert _engine_previews(isolated_home) == stacks
    assert any(v["policy"] for v in with_pack.values())

    # No policy results on this machine (another machine, a cleared home): the engine runs, and records them.
    shutil.rmtree(isolated_home / ".npa-pulumi" / "policy-results")
    _preview(spec)
    assert _engine_previews(isolated_home) == stacks
    _preview(spec)
    assert _engine_previews(isolated_home) == set()

    # --refresh previews every stack.
    _preview(spec, "--refresh")
    assert _engine_previews(isolated_home) == stacks
