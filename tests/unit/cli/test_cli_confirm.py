"""Mutating commands without a terminal and without --yes: they refuse, change nothing, exit 1 (the
operation was not done; exit 2 stays for invalid input) and, with --output json, print one JSON document."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: confirm
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - name: a
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "npa_pulumi.cli.main", *args],
        capture_output=True,
        text=True,
        input="",
        env=dict(os.environ),
        timeout=300,
        check=False,
    )


DESTROY_ALL = "destroy --delete-buckets --delete-nonempty-buckets --delete-storage-identity --delete-projects"


@pytest.mark.parametrize("command", ["up", "destroy", DESTROY_ALL])
@pytest.mark.parametrize("output", ["text", "json"])
def test_refusal_without_yes_exits_1(isolated_home: Path, tmp_path: Path, command: str, output: str) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    result = _cli(*command.split(), "--spec", str(spec), "--output", output)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "without --yes" in result.stderr or output == "json"
    if output == "json":
        document = json.loads(result.stdout)  # exactly one document
        assert document["ok"] is False
        assert document["error"]["kind"] == "not-confirmed"
        assert "--yes" in document["error"]["message"]
    else:
        assert result.stdout == ""
    # Nothing was created: no stack in the backend.
    stacks = isolated_home / ".npa-pulumi" / "state" / ".pulumi" / "stacks"
    assert not any(stacks.rglob("*.json")) if stacks.exists() else True


def test_dry_run_needs_no_confirmation_and_creates_nothing(isolated_home: Path, tmp_path: Path) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    result = _cli(*DESTROY_ALL.split(), "--dry-run", "--spec", str(spec), "--output", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)  # exactly one document
    assert document["dry_run"] is True and document["ok"] is True
    # Nothing deployed: every phase says so, and nothing is planned for deletion.
    assert [(p["name"], p["status"]) for p in document["phases"]] == [
        ("cluster:confirm.a.cluster", "absent"),
        ("network:confirm.a", "absent"),
    ]
    stacks = isolated_home / ".npa-pulumi" / "state" / ".pulumi" / "stacks"
    assert not any(stacks.rglob("*.json")) if stacks.exists() else True
    assert not (isolated_home / ".npa-pulumi" / "teardown-receipts").exists()
