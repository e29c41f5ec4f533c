"""Local clusters start one at a time machine-wide (kwokctl picks free ports, then binds them): the start
lock is one file for every process of this user, whatever TMPDIR each was given."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from npa_pulumi.simulator.kube.controlplane import start_lock_path


def test_the_start_lock_does_not_follow_tmpdir(tmp_path: Path) -> None:
    probe = "from npa_pulumi.simulator.kube.controlplane import start_lock_path; print(start_lock_path())"
    elsewhere = subprocess.run(
        [sys.executable, "-c", probe],
        env={"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert elsewhere == str(start_lock_path())
    assert not elsewhere.startswith(str(tmp_path))
