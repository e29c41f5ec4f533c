"""The cost of a change end to end: `up` records each stack's cost basis, `preview --output markdown` of a
grown or shrunk spec shows Infracost's headline and per-project table, `status` what the deployed fleet
costs, and the fleet-monthly-budget guardrail fails a preview over its limit when mandatory. The installed
CLI as a subprocess, the real engine and terraform, the local cloud, a private HOME."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / ".venv" / "bin" / "npa-pulumi"

HEAD = """\
apiVersion: npa.fleet/v0.0.1
name: cost-demo
region: us-central1
project_prefix: "cost-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - name: alpha
    clusters:
      - name: train
"""
INFER = """\
      - name: infer
        cpu_nodes: {count: 2, platform: cpu-d3, preset: 8vcpu-32gb}
"""
EXTRA = """\
      - name: extra
        cpu_nodes: {count: 1, platform: cpu-d3, preset: 8vcpu-32gb}
"""
# cpu-d3 4vcpu-16gb is $0.0992/h (SkyPilot); 8vcpu-32gb from the per-unit rates: 8 x 0.012 + 32 x 0.0032.
TRAIN_MONTHLY = 0.0992 * 730  # 72.416
INFER_MONTHLY = 2 * 0.1984 * 730  # 289.664
EXTRA_MONTHLY = 0.1984 * 730  # 144.832


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), *args], capture_output=True, text=True, env=dict(os.environ), timeout=900, cwd=REPO
    )


def preview(spec: Path, tmp: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], str, Any]:
    out, json_out = tmp / "preview.md", tmp / "preview.json"
    done = run_cli(
        "preview", "--spec", str(spec), "--cloud", "local", "--output", "markdown", "--out", str(out),
        "--json-out", str(json_out), "--no-preflight", *extra,
    )  # fmt: skip
    return done, out.read_text() if out.exists() else "", json.loads(json_out.read_text() or "null")


def project_row(document: str, key: str) -> list[str]:
    line = next(line for line in document.splitlines() if line.startswith(f"| <code>{key}</code> |"))
    return [cell.strip() for cell in line.strip("|").split("|")][1:]


def test_cost_of_growing_and_shrinking_a_deployed_fleet(isolated_home: Path, tmp_path: Path) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(HEAD + INFER)
    deployed = run_cli("up", "--spec", str(spec), "--cloud", "local", "--yes", "-j", "2", "--output", "json")
    assert deployed.returncode == 0, deployed.stderr[-4000:]

    # status: what the deployed fleet costs now, from what the stacks recorded.
    status = run_cli("status", "--spec", str(spec), "--cloud", "local", "--output", "json")
    assert status.returncode == 0, status.stderr[-4000:]
    now = json.loads(status.stdout)["cost"]
    assert now["monthly_usd"] == pytest.approx(TRAIN_MONTHLY + INFER_MONTHLY)
    clusters = {s["cluster_name"]: s for p in now["projects"] for s in p["stacks"] if s["cluster_name"]}
    assert clusters["infer"]["cost"]["monthly_usd"] == pytest.approx(INFER_MONTHLY)
    assert now["unrecorded"] == []

    # Unchanged: the cost will not change.
    done, document, result = preview(spec, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "**monthly cost will not change**" in document
    assert result["cost"]["diff_monthly_usd"] == 0

    # Adding a cluster: the increase in the headline and the per-project table.
    spec.write_text(HEAD + INFER + EXTRA)
    done, document, result = preview(spec, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "**monthly cost will increase by $144.83 (+40%)**" in document, document[:3000]
    assert project_row(document, "alpha") == ["$362.08", "$506.91", "+$144.83"]
    assert "| **All projects** | **$362.08** | **$506.91** | **+$144.83** |" in document
    assert "- **+** <code>cost-demo.alpha.extra</code> +$144.83/month" in document
    cost = result["cost"]
    assert cost["diff_monthly_usd"] == pytest.approx(EXTRA_MONTHLY)
    added = {s["stack"]: s for s in cost["stacks"]}["cost-demo.alpha.extra"]
    assert added["change"] == "added" and added["past_monthly_usd"] == 0

    # A budget the increase exceeds: advisory by default, mandatory fails the preview (exit 1).
    config = tmp_path / "policy.json"
    config.write_text(json.dumps({"fleet-monthly-budget": {"monthly_increase_limit_usd": 100}}))
    done, document, result = preview(spec, tmp_path, "--policy-config", str(config))
    assert done.returncode == 0, done.stderr[-4000:]
    assert [v["level"] for v in result["policy"]] == ["advisory"]
    config.write_text(
        json.dumps(
            {"fleet-monthly-budget": {"enforcementLevel": "mandatory", "monthly_increase_limit_usd": 100}}
        )
    )
    done, document, result = preview(spec, tmp_path, "--policy-config", str(config))
    assert done.returncode == 1, done.stderr[-4000:]
    assert result["ok"] is False
    (violation,) = result["policy"]
    assert violation["policy"] == "fleet-monthly-budget" and violation["level"] == "mandatory"
    assert "<code>fleet-monthly-budget</code>" in document and "**1 mandatory**" in document
    # ... and stops `up` before any change (the final preview below still finds $362.08 deployed).
    refused = run_cli(
        "up",
        "--spec",
        str(spec),
        "--cloud",
        "local",
        "--yes",
        "--policy-config",
        str(config),
        "--output",
        "json",
    )
    assert refused.returncode == 1, refused.stderr[-4000:]
    body = json.loads(refused.stdout)
    assert body["error"].startswith("fleet-monthly-budget (mandatory): this change adds $144.83 a month")
    assert body["stacks"] == [] and body["cost"]["diff_monthly_usd"] == pytest.approx(EXTRA_MONTHLY)

    # Removing a cluster: the saving.
    spec.write_text(HEAD)
    done, document, result = preview(spec, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "**monthly cost will decrease by $289.66 (-80%)**" in document, document[:3000]
    assert project_row(document, "alpha") == ["$362.08", "$72.42", "-$289.66"]
    assert "- **-** <code>cost-demo.alpha.infer</code> -$289.66/month" in document
    removed = {s["stack"]: s for s in result["cost"]["stacks"]}["cost-demo.alpha.infer"]
    assert removed["change"] == "removed" and removed["monthly_usd"] == 0

    # A destroy says what it saves: the recorded cost of the clusters it deletes (buckets are retained).
    spec.write_text(HEAD + INFER)
    dry = run_cli("destroy", "--spec", str(spec), "--cloud", "local", "--dry-run", "--output", "json")
    assert dry.returncode == 0, dry.stderr[-4000:]
    saving = json.loads(dry.stdout)["cost"]
    assert saving["headline"] == "this destroy would save $362.08 a month"
    assert {s["stack"] for s in saving["stacks"]} == {"cost-demo.alpha.train", "cost-demo.alpha.infer"}
