"""Helpers for fleet integration tests: run the real CLI as a subprocess, read the local cloud's inventory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "npa_pulumi.cli.main"]


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def npa(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 900,
    check: bool = False,
    input_text: str | None = None,
) -> CliResult:
    proc = subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        input=input_text,
        cwd=REPO,
    )
    result = CliResult(proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"npa-pulumi {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-4000:]}\n"
            f"{proc.stdout[-2000:]}"
        )
    return result


def inventory(env: dict[str, str] | None = None) -> dict[str, Any]:
    shown: dict[str, Any] = npa("local-cloud", "show", "--output", "json", env=env, check=True).json()
    return shown


def write_spec(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def by_stack(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["stack"]: s for s in document["stacks"]}
