"""A terraform run that meets the state lock of a stopping terraform (a killed run's) is tried again, on the
one retry policy, until the lock is gone; any other failure is reported at once, with terraform's words."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from npa_pulumi.bridge.terraform import TerraformError, TerraformWorkspace

FAKE = """#!/bin/sh
count=$(cat "$COUNTER" 2>/dev/null || echo 0)
count=$((count + 1))
echo "$count" > "$COUNTER"
if [ "$count" -le "$LOCKED_TIMES" ]; then
  echo "Error acquiring the state lock" >&2
  exit 1
fi
if [ -n "$OTHER_ERROR" ]; then
  echo "$OTHER_ERROR" >&2
  exit 1
fi
echo applied
"""


@pytest.fixture
def workspace(tmp_path: Path) -> TerraformWorkspace:
    binary = tmp_path / "terraform"
    binary.write_text(FAKE)
    binary.chmod(0o755)
    ws = TerraformWorkspace(root=tmp_path / "work", terraform_bin=binary)
    ws.module_dir.mkdir(parents=True)
    return ws


def _env(tmp_path: Path, locked: int, other: str = "") -> dict[str, str]:
    return {
        **os.environ,
        "COUNTER": str(tmp_path / "count"),
        "LOCKED_TIMES": str(locked),
        "OTHER_ERROR": other,
    }


def test_a_held_state_lock_is_waited_out(workspace: TerraformWorkspace, tmp_path: Path) -> None:
    workspace.apply(_env(tmp_path, locked=1))
    assert (tmp_path / "count").read_text().strip() == "2"
    log = workspace.log_path.read_text()
    assert "(exit 0," in log and "applied" in log


def test_other_failures_are_not_retried(workspace: TerraformWorkspace, tmp_path: Path) -> None:
    with pytest.raises(TerraformError, match="terraform apply failed") as failed:
        workspace.apply(_env(tmp_path, locked=0, other="Error: quota exceeded"))
    assert (tmp_path / "count").read_text().strip() == "1"
    assert "quota exceeded" in str(failed.value)
