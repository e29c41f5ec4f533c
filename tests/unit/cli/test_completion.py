"""Shell completion (issue 32, item 4): click's own mechanism for bash, zsh and fish, and `--only-projects`
/ `--only-clusters` completed from the `--spec` on the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: comp
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - name: alpha
    clusters: [{name: train}, {name: infer}]
  - name: beta
    clusters: [{name: train}, {name: batch}]
"""


def _complete(words: str, tmp_path: Path) -> list[str]:
    parts = words.split(" ")
    env = {
        **os.environ,
        "_NPA_PULUMI_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(parts) - 1),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "npa_pulumi.cli.main"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if line.startswith("plain,")]


@pytest.fixture
def spec(tmp_path: Path) -> str:
    path = tmp_path / "fleet.yaml"
    path.write_text(SPEC)
    return str(path)


def test_projects_complete_from_the_spec(spec: str, tmp_path: Path) -> None:
    assert _complete(f"npa-pulumi status --spec {spec} --only-projects ", tmp_path) == ["alpha", "beta"]
    assert _complete(f"npa-pulumi up --spec {spec} --only-projects alpha,", tmp_path) == ["alpha,beta"]


def test_clusters_complete_from_the_chosen_projects(spec: str, tmp_path: Path) -> None:
    every = _complete(f"npa-pulumi status --spec {spec} --only-clusters ", tmp_path)
    assert every == ["train", "infer", "batch"]
    chosen = _complete(f"npa-pulumi destroy --spec {spec} --only-projects beta --only-clusters ", tmp_path)
    assert chosen == ["train", "batch"]
    assert _complete(f"npa-pulumi status --spec {spec} --only-clusters i", tmp_path) == ["infer"]


def test_a_missing_or_bad_spec_completes_nothing(tmp_path: Path) -> None:
    assert _complete("npa-pulumi status --only-clusters ", tmp_path) == []
    assert _complete("npa-pulumi status --spec nope.yaml --only-clusters ", tmp_path) == []


def test_commands_complete(tmp_path: Path) -> None:
    assert "doctor" in _complete("npa-pulumi do", tmp_path)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_shells_script(shell: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "npa_pulumi.cli.main", "completion", shell],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "_NPA_PULUMI_COMPLETE" in proc.stdout and f"{shell}_complete" in proc.stdout


def test_an_unknown_shell_is_invalid_input() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "npa_pulumi.cli.main", "completion", "tcsh"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
