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


def _checkpoint_of(stacks: Path, stack: str) -> dict[str, object]:
    """A new stack's checkpoint, its name and creation time taken out (all that differs between two)."""
    document = json.loads((stacks / f"{stack}.json").read_text())
    latest = document["checkpoint"]["latest"]
    assert latest["manifest"].pop("time")
    assert document["checkpoint"].pop("stack") == f"organization/{PROJECT}/{stack}"
    return dict(document)


def test_a_stack_created_without_the_engine_is_the_stack_init_makes(
    isolated_home: Path, tmp_path: Path
) -> None:
    """`create_passphrase_stack` writes what `pulumi stack init` writes for a stack whose settings hold
    its salt (a cluster stack sharing its project stack's), and the engine then lists, updates, decrypts
    and reads that stack as its own."""
    from pulumi import automation as auto

    from npa_pulumi.engine.automation import StackOp
    from npa_pulumi.engine.automation.locks import LockRecovery
    from npa_pulumi.engine.automation.selection import StackSelector
    from npa_pulumi.engine.automation.workspace import engine_version, workspace_options
    from npa_pulumi.engine.progress import Progress

    root = tmp_path / "backend"
    url = f"file://{root}"
    settings = EngineSettings.resolve(backend=url)
    select_or_create_stack(settings, "formats.project", _program, project_name=PROJECT)
    salt = diy.passphrase_salt(url, "formats.project", PROJECT)
    assert salt is not None
    opts = workspace_options(settings, _program, PROJECT)
    opts.stack_settings = {"formats.engine": auto.StackSettings(encryption_salt=salt)}
    auto.create_stack("formats.engine", project_name=PROJECT, program=_program, opts=opts)

    selector = StackSelector(settings, PROJECT, LockRecovery(url, PROJECT, False, Progress(enabled=False)))
    op = StackOp("formats.fast", "cluster", "p", "c", _program, {}, key_shared_with="formats.project")
    stack = selector.select(op, create=True)
    assert stack is not None and "formats.fast" in selector.created
    stacks = root / ".pulumi" / "stacks" / PROJECT
    assert not (stacks / "formats.fast.json.bak").exists()  # no engine wrote it (stack init leaves one)
    assert _checkpoint_of(stacks, "formats.fast") == _checkpoint_of(stacks, "formats.engine")
    assert diy.passphrase_salt(url, "formats.fast", PROJECT) == salt
    version = engine_version()
    assert version is not None
    with pytest.raises(FileExistsError):  # never over a stack that exists
        diy.create_passphrase_stack(url, PROJECT, "formats.fast", salt, version)

    listed = {s.name for s in stack.workspace.list_stacks()}
    assert {"formats.project", "formats.engine", "formats.fast"} <= listed
    stack.up()
    assert stack.outputs()["token"].value == "diy-format-secret"  # decrypted with the shared key
    assert diy.checkpoint_outputs(url, "formats.fast", PROJECT) == {
        "plain": "value",
        "token": diy.SECRET_PLACEHOLDER,
    }
    assert diy.last_update_result(url, "formats.fast", PROJECT) == "succeeded"
