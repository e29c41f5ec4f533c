"""A stack's fingerprint covers its plan and what ran it: this product, the engine and (cluster stacks
only) terraform/tofu, so `up` after an upgrade of any of them does not skip the stack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npa_pulumi import __version__
from npa_pulumi.engine.automation.workspace import pulumi_command
from npa_pulumi.engine.fingerprint import UNAVAILABLE, ToolchainVersions, fingerprint, toolchain_versions
from npa_pulumi.engine.programs import ProjectPlan

PLAN = ProjectPlan(
    fleet="f", project_key="p", display_name="P", project_id=None, region="r", tenant_id="t", stack="f.p"
)
TOOLS = ToolchainVersions(npa="0.1.0", engine="3.259.0", terraform="tofu 1.10.6")


def test_every_covered_version_changes_the_fingerprint() -> None:
    base = fingerprint(PLAN, "local", "", TOOLS.covering(terraform=True))
    assert base == fingerprint(PLAN, "local", "", TOOLS.covering(terraform=True))  # stable
    for changed in (
        ToolchainVersions(npa="0.2.0", engine="3.259.0", terraform="tofu 1.10.6"),
        ToolchainVersions(npa="0.1.0", engine="3.260.0", terraform="tofu 1.10.6"),
        ToolchainVersions(npa="0.1.0", engine="3.259.0", terraform="terraform 1.10.6"),
    ):
        assert fingerprint(PLAN, "local", "", changed.covering(terraform=True)) != base
    assert fingerprint(PLAN, "nebius", "", TOOLS.covering(terraform=True)) != base
    assert fingerprint(PLAN, "local", "other", TOOLS.covering(terraform=True)) != base


def test_project_stacks_do_not_depend_on_terraform() -> None:
    assert TOOLS.covering(terraform=False) == {"npa": "0.1.0", "engine": "3.259.0"}
    other_terraform = ToolchainVersions(npa="0.1.0", engine="3.259.0", terraform="terraform 1.11.4")
    assert fingerprint(PLAN, "local", "", TOOLS.covering(terraform=False)) == fingerprint(
        PLAN, "local", "", other_terraform.covering(terraform=False)
    )


def _script(path: Path, stdout: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{stdout}\nEOF\n")
    path.chmod(0o755)
    return path


def test_versions_come_from_the_binaries_in_use(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pulumi = _script(tmp_path / "engine" / "bin" / "pulumi", "v3.259.0")
    tofu = _script(tmp_path / "tf" / "tofu", json.dumps({"terraform_version": "1.10.6"}))
    monkeypatch.setenv("NPA_PULUMI_BIN", str(pulumi))
    monkeypatch.setenv("NPA_TERRAFORM_BIN", str(tofu))
    pulumi_command.cache_clear()
    try:
        assert toolchain_versions() == ToolchainVersions(
            npa=__version__, engine="3.259.0", terraform="tofu 1.10.6"
        )
        monkeypatch.setenv("NPA_TERRAFORM_BIN", str(tmp_path / "missing" / "terraform"))
        assert toolchain_versions().terraform == UNAVAILABLE
    finally:
        pulumi_command.cache_clear()
