"""The sharded CI example: a valid workflow (offline schema check) whose matrix and --shard agree."""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path

from npa_pulumi.output.markdown import MARKER_PREFIX

# The schema check and loader of test_workflows.py (a sibling test module, which pytest puts on sys.path).
_workflows = importlib.import_module("test_workflows")
load, validate_offline = _workflows.load, _workflows.validate_offline

SHARDED = Path(__file__).resolve().parents[3] / "examples" / "ci" / "github" / "fleet-sharded-up.yml"


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
    # The passphrase comes from a secret into the environment, never onto the command line; the state
    # bucket's key is minted by the run itself, living a little past the job's timeout.
    assert deploy["env"]["PULUMI_CONFIG_PASSPHRASE"].startswith("${{ secrets.")
    assert "PULUMI_CONFIG_PASSPHRASE" not in deploy["run"]
    assert "AWS_SECRET_ACCESS_KEY" not in deploy["env"]
    assert int(deploy["env"]["NPA_STATE_KEY_LIFETIME_S"]) > job["timeout-minutes"] * 60


# ------------------------------------------------------------------------------ fleet-deploy-matrix.yml

MATRIX = SHARDED.parent / "fleet-deploy-matrix.yml"
run_scripts = _workflows.run_scripts


def _step(job: dict[str, object], name: str) -> dict[str, object]:
    return next(step for step in job["steps"] if step.get("name") == name)  # type: ignore[attr-defined]


def _command(step: dict[str, object]) -> str:
    return " ".join(str(step["run"]).replace("\\\n", " ").split())


def test_matrix_workflow_is_valid_offline_and_its_scripts_parse() -> None:
    result = validate_offline(MATRIX)
    assert result.returncode == 0, result.stdout + result.stderr
    for script in run_scripts(load(MATRIX)):
        parsed = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
        assert parsed.returncode == 0, f"{parsed.stderr}\n{script}"


def test_matrix_workflow_runs_projects_once_then_clusters_across_every_shard() -> None:
    workflow = load(MATRIX)
    shards = list(range(1, int(workflow["env"]["SHARDS"]) + 1))
    projects, clusters = workflow["jobs"]["projects"], workflow["jobs"]["clusters"]
    assert "strategy" not in projects
    up_projects = _command(_step(projects, "Deploy the project stacks"))
    assert "npa-pulumi up" in up_projects and "--stage projects" in up_projects
    assert "--shard" not in up_projects and "--no-preflight" not in up_projects  # the whole fleet's fit, once
    assert clusters["needs"] == "projects"
    assert clusters["strategy"]["matrix"]["shard"] == shards and clusters["strategy"]["fail-fast"] is False
    up_clusters = _command(_step(clusters, "Deploy this shard's clusters"))
    assert '--stage clusters --shard "${SHARD}/${SHARDS}"' in up_clusters
    for job in (projects, clusters):
        assert job["environment"] == "fleet-production" and "--break-lock" not in str(job)
        assert job["permissions"] == {"contents": "read", "id-token": "write"}  # keyless Nebius auth
    assert "refs/heads/main" in projects["if"]


def test_matrix_previews_are_merged_into_one_comment() -> None:
    workflow = load(MATRIX)
    preview, comment = workflow["jobs"]["preview"], workflow["jobs"]["comment"]
    assert preview["strategy"]["matrix"]["shard"] == list(range(1, int(workflow["env"]["SHARDS"]) + 1))
    shard_preview = _command(_step(preview, "Preview this shard"))
    assert '--shard "${SHARD}/${SHARDS}"' in shard_preview and "--output json" in shard_preview
    assert preview["permissions"] == {"contents": "read", "id-token": "write"}  # only the comment job writes
    assert comment["needs"] == "preview" and "always()" in comment["if"]
    assert comment["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}
    download = next(s for s in comment["steps"] if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"]["pattern"] == "fleet-preview-shard-*"
    merge = _command(_step(comment, "Merge the shards into one preview"))
    assert "npa-pulumi preview-merge preview-shard-*.json --spec" in merge
    assert "--output markdown --out preview.md --json-out preview.json" in merge
    assert "npa-pulumi preflight" in merge and "--preflight preflight.json" in merge
    script = str(_step(comment, "Create or update the preview comment")["with"]["script"])  # type: ignore[index]
    assert f"<!-- {MARKER_PREFIX}" in script and "readFileSync('preview.md'" in script
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "run" in step:
                assert "AWS_SECRET_ACCESS_KEY" not in step["run"]
                assert "PULUMI_CONFIG_PASSPHRASE" not in step["run"]
