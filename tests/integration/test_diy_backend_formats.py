"""The pinned engine writes the DIY files in exactly the versions engine.diy_backend understands, and
what that module reads and writes agrees with what the Automation API says about the same stack."""

from __future__ import annotations

import json
from pathlib import Path

import pulumi
import pytest

from npa_pulumi.engine.automation import diy_backend as diy
from npa_pulumi.engine.automation.workspace import EngineSettings, select_or_create_stack

pytestmark = pytest.mark.integration

PROJECT = "npa-diy-formats"


def _program() -> None:
    pulumi.export("plain", "value")
    pulumi.export("token", pulumi.Output.secret("diy-format-secret"))


def test_pinned_engine_files_match_the_versions_read(isolated_home: Path, tmp_path: Path) -> None:
    root = tmp_path / "backend"
    url = f"file://{root}"
    settings = EngineSettings.resolve(backend=url)
    stack = select_or_create_stack(settings, "formats.dev", _program, project_name=PROJECT)
    stack.set_tag("npa:fleet", "formats")  # through the API: the engine writes the tags file
    stack.up()

    assert (root / ".pulumi" / "meta.yaml").read_text().split() == ["version:", str(diy.META_VERSION)]
    stacks = diy.stacks_dir(url, PROJECT)
    assert stacks == root / ".pulumi" / "stacks" / PROJECT
    checkpoint = json.loads((stacks / "formats.dev.json").read_text())
    assert checkpoint["version"] == diy.CHECKPOINT_VERSION
    tags = json.loads((stacks / "formats.dev.pulumi-tags").read_text())
    assert tags["version"] == diy.TAGS_VERSION and tags["tags"]["npa:fleet"] == "formats"

    assert diy.checkpoint_outputs(url, "formats.dev", PROJECT) == {
        "plain": "value",
        "token": diy.SECRET_PLACEHOLDER,
    }
    assert not diy.interrupted(url, "formats.dev", PROJECT)
    assert diy.write_tags(url, PROJECT, "formats.dev", {"npa:kind": "project"})
    listed = stack.list_tags()
    assert listed["npa:fleet"] == "formats" and listed["npa:kind"] == "project"


def _failing_program() -> None:
    raise RuntimeError("this update fails on purpose")


def test_the_newest_history_entry_is_the_engines_last_update(isolated_home: Path, tmp_path: Path) -> None:
    """`last_update_result` reads the engine's history files: what `pulumi stack history` says."""
    url = f"file://{tmp_path / 'backend'}"
    settings = EngineSettings.resolve(backend=url)
    stack = select_or_create_stack(settings, "formats.history", _program, project_name=PROJECT)
    assert diy.last_update_result(url, "formats.history", PROJECT) is None  # no update yet
    stack.up()
    assert diy.last_update_result(url, "formats.history", PROJECT) == "succeeded"
    failing = select_or_create_stack(settings, "formats.history", _failing_program, project_name=PROJECT)
    with pytest.raises(Exception, match="fails on purpose"):
        failing.up()
    assert stack.history(page_size=1)[0].result == "failed"
    assert diy.last_update_result(url, "formats.history", PROJECT) == "failed"
