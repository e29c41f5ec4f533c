"""`npa-pulumi preview --output markdown` end to end: the installed CLI as a subprocess, the real Pulumi
engine and terraform, the local cloud, a private HOME. The document it writes is what CI posts as the one
sticky pull-request comment, so it is checked the way a reviewer (and the workflow) reads it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.output.markdown import COMMENT_LIMIT

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / ".venv" / "bin" / "npa-pulumi"

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: pr-preview
region: us-central1
project_prefix: "prp-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - name: alpha
    clusters:
      - name: train
      - name: infer
  - name: beta
    clusters:
      - name: solo
"""

PROJECT_STACKS = ["pr-preview.alpha", "pr-preview.beta"]
CLUSTER_STACKS = ["pr-preview.alpha.train", "pr-preview.alpha.infer", "pr-preview.beta.solo"]


def run_cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    # isolated_home set HOME, NPA_PULUMI_HOME, NPA_LOCAL_CLOUD_DIR and TF_CLI_CONFIG_FILE in os.environ.
    return subprocess.run(
        [str(CLI), *args], capture_output=True, text=True, env=dict(os.environ), timeout=timeout, cwd=REPO
    )


def preview(spec: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("preview", "--output", "markdown", "--spec", str(spec), "--cloud", "local", *extra)


def project_sections(document: str) -> dict[str, str]:
    """`#### Project <code>key</code>` sections by project key (they end at the next heading)."""
    sections = re.split(r"^#### ", document, flags=re.MULTILINE)
    found = (re.match(r"Project <code>([^<]+)</code>", s) for s in sections)
    return {m.group(1): m.string for m in found if m}


def table_rows(document: str) -> dict[str, list[str]]:
    """Project-table rows by stack name: the cells after the stack cell."""
    rows: dict[str, list[str]] = {}
    for section in project_sections(document).values():
        for line in section.splitlines():
            match = re.match(r"^\| (.+?) \| <code>([^<]+)</code> \| (.+) \|$", line)
            if match:
                rows[match.group(2)] = [c.strip() for c in match.group(3).split(" | ")]
    return rows


def check_document(document: str, result: dict[str, Any]) -> None:
    assert len(document) < COMMENT_LIMIT
    assert document.splitlines()[0] == "<!-- npa-pulumi:fleet-preview:pr-preview -->"
    assert "fleet <code>pr-preview</code>" in document
    # One table per project, each listing its own stacks.
    sections = project_sections(document)
    assert set(sections) == {"alpha", "beta"}
    alpha, beta = sections["alpha"], sections["beta"]
    for stack in ("pr-preview.alpha", "pr-preview.alpha.train", "pr-preview.alpha.infer"):
        assert f"<code>{stack}</code>" in alpha and f"<code>{stack}</code>" not in beta
    for stack in ("pr-preview.beta", "pr-preview.beta.solo"):
        assert f"<code>{stack}</code>" in beta
    # The table agrees with the JSON written beside it.
    rows = table_rows(document)
    by_stack = {s["stack"]: s for s in result["stacks"]}
    assert set(rows) == set(PROJECT_STACKS + CLUSTER_STACKS) == set(by_stack)
    for stack, cells in rows.items():
        create = by_stack[stack]["changes"].get("create", 0)
        assert cells[1] == (str(create) if create else "·"), (stack, cells)
    assert document.count("<details>") == document.count("</details>")


def test_preview_markdown_against_the_local_cloud(isolated_home: Path, tmp_path: Path) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    out, json_out = tmp_path / "preview.md", tmp_path / "preview.json"

    first = preview(spec, "--out", str(out), "--json-out", str(json_out))
    assert first.returncode == 0, first.stderr[-4000:]
    assert first.stdout == ""  # the document went to --out; progress goes to stderr
    document = out.read_text()
    result = json.loads(json_out.read_text())
    check_document(document, result)
    summary = next(line for line in document.splitlines() if " · policy: " in line)
    assert summary.startswith("**5 stacks changed**, 0 unchanged, 0 failed")
    assert "preflight:" in summary
    for stack in CLUSTER_STACKS:
        assert f"<summary><code>{stack}</code> — 🟡 changes" in document
    assert "capacityblockgroup-e00" not in document

    # Without --out the document is the whole of stdout (what `> preview.md` in a workflow captures).
    deployed = run_cli("up", "--spec", str(spec), "--cloud", "local", "--yes", "--output", "json")
    assert deployed.returncode == 0, deployed.stderr[-4000:]
    second = preview(spec, "--json-out", str(json_out))
    assert second.returncode == 0, second.stderr[-4000:]
    document = second.stdout
    check_document(document, json.loads(json_out.read_text()))
    summary = next(line for line in document.splitlines() if " · policy: " in line)
    assert summary.startswith("0 stacks changed, 5 unchanged, 0 failed")
    rows = table_rows(document)
    assert all(cells[0] == "⚪ no changes" and cells[-1] == "✅ pass" for cells in rows.values()), rows
    assert "<details>" not in document  # nothing changed, so there is nothing to expand
