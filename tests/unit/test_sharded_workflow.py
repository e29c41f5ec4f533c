"""The sharded CI example: a valid workflow (offline schema check) whose matrix and --shard agree."""

from __future__ import annotations

import importlib
from pathlib import Path

# The schema check and loader of test_workflows.py (a sibling test module, which pytest puts on sys.path).
_workflows = importlib.import_module("test_workflows")
load, validate_offline = _workflows.load, _workflows.validate_offline

SHARDED = Path(__file__).resolve().parents[2] / "examples" / "ci" / "github" / "fleet-sharded-up.yml"


def test_sharded_workflow_is_valid_offline() -> None:
    result = validate_offline(SHARDED)
    assert result.returncode == 0, result.stdout + result.stderr


def test_matrix_covers_every_shard_once() -> None:
    workflow = load(SHARDED)
    job = workflow["jobs"]["up"]
    shards = job["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, int(workflow["env"]["SHARDS"]) + 1))
    assert job["strategy"]["fail-fast"] is False
    deploy = next(step for step in job["steps"] if step.get("name") == "Deploy this shard")
    assert '--shard "${SHARD}/${SHARDS}"' in deploy["run"]
    assert "--break-lock" not in deploy["run"]
    # Credentials come from secrets into the environment, never onto the command line.
    assert deploy["env"]["AWS_SECRET_ACCESS_KEY"].startswith("${{ secrets.")
    assert "AWS_SECRET_ACCESS_KEY" not in deploy["run"]
