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


def health_report(spec: str, *extra: str) -> tuple[int, dict[str, Any]]:
    """`health --output json` of a fleet: its exit code (0 healthy, 1 not) and its document."""
    result = npa("health", "--spec", spec, "--output", "json", *extra)
    assert result.code in (0, 1), result.stderr[-3000:]
    return result.code, result.json()


def health_nodes(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The nodes of a one-cluster health document, by name."""
    [cluster] = document["clusters"]
    return {n["name"]: n for n in cluster["nodes"]}


def write_spec(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def by_stack(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["stack"]: s for s in document["stacks"]}


def private_evidence(evidence_dir: Path) -> dict[str, dict[str, Any]]:
    """The verifiers' evidence files in `evidence_dir`, by file name."""
    return {path.name: json.loads(path.read_text()) for path in sorted(evidence_dir.glob("*.json"))}


def _identifying(document: Any, found: set[str], key: str = "") -> None:
    """What in a verifier's evidence names this cluster's machines and objects: node names (the keys of its
    per-node tables), pod and node fields, the cluster's id, the run id, probe output and error text."""
    if isinstance(document, dict):
        for name, value in document.items():
            if name in ("nodes", "workers", "hardware") and isinstance(value, dict):
                found.update(value)
            _identifying(value, found, name)
    elif isinstance(document, list):
        for value in document:
            if key in ("nodes", "failures", "errors", "gpu_workloads", "repaired_stale_taint_on", "repaired"):
                found.add(str(value))
            _identifying(value, found, key)
    elif isinstance(document, str) and key in ("pod", "node", "run_id", "output_tail", "error", "cluster_id"):
        found.add(document)


def assert_publishable(result: CliResult, evidence_dir: Path) -> None:
    """Nothing of what the verifier's evidence files hold appears in its stdout or stderr."""
    files = private_evidence(evidence_dir)
    assert files, f"no evidence written to {evidence_dir}"
    secrets: set[str] = set()
    for document in files.values():
        _identifying(document, secrets)
    secrets = {s for s in secrets if len(s) >= 6}
    assert secrets, files
    published = result.stdout + result.stderr
    leaked = sorted(s for s in secrets if s in published)
    assert not leaked, f"published output holds private evidence: {leaked[:5]}"
    assert str(evidence_dir) not in published
