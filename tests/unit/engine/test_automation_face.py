"""The Automation API fence's face (engine/automation/__init__.py): every name it offers resolves, on first
use, to what its module defines; the SDK's backend URL loads none of the runner; the runner's commands are
one enum; and the one `stack_names` reads a DIY backend's files, asks the engine elsewhere when given its
settings, and returns nothing without them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from npa_pulumi.engine import automation
from npa_pulumi.engine.automation import (
    EngineSettings,
    StackCommand,
    StackListingFailed,
    StackOp,
    stack_names,
)
from npa_pulumi.engine.automation.audit_store import append, read_all
from npa_pulumi.engine.automation.diy_backend import diy_root, interrupted, read_tags, s3_bucket, stacks_dir


def test_every_name_of_the_face_resolves_to_its_module() -> None:
    for name in automation.__all__:
        assert getattr(automation, name) is not None, name
    # Names chosen for the face's users are the modules' own things, not copies.
    assert automation.stack_interrupted is interrupted
    assert automation.file_backend_root is diy_root
    assert automation.checkpoint_dir is stacks_dir
    assert automation.stored_tags is read_tags
    assert automation.s3_state_bucket is s3_bucket
    assert automation.append_audit_record is append
    assert automation.read_audit_records is read_all
    assert set(automation.__all__) <= set(dir(automation))
    with pytest.raises(AttributeError, match="has no attribute 'stacks'"):
        getattr(automation, "stacks")  # noqa: B009


def test_the_backend_url_loads_none_of_the_runner() -> None:
    probe = (
        "import sys\nfrom npa_pulumi.engine.automation import resolve_backend_url\n"
        "print(' '.join(m for m in sys.modules if m.startswith('npa_pulumi.engine')))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert "npa_pulumi.engine.automation.workspace" in loaded
    assert not loaded & {
        "npa_pulumi.engine.automation.stack_operations",
        "npa_pulumi.engine.automation.diy_backend",
        "npa_pulumi.output.progress",
    }


def test_the_runners_commands_are_one_enum() -> None:
    assert [c.value for c in StackCommand] == ["up", "preview", "refresh", "destroy"]
    assert {c for c in StackCommand if c.creates_stack} == {StackCommand.UP, StackCommand.PREVIEW}
    assert [c.verb for c in StackCommand] == ["updating", "previewing", "refreshing", "destroying"]
    assert f"{StackCommand.DESTROY}" == "destroy"  # the per-stack log's name: `<stack>.destroy.log`
    op = StackOp("f.p", "project", "p", None, None, {})
    assert op.result("absent").status == "absent"


def _engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> EngineSettings:
    """Settings whose engine is a stand-in `pulumi` answering `stack ls` (what the real one prints for a
    backend whose files npa-pulumi does not read), and the arguments it was given."""
    binary = tmp_path / "pulumi"
    binary.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "args"}\n{script}\n')
    binary.chmod(0o755)
    monkeypatch.setenv("NPA_PULUMI_BIN", str(binary))
    return EngineSettings.resolve("gs://state")


@pytest.mark.usefixtures("isolated_home")
def test_stack_names_asks_the_engine_only_where_the_files_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "state"
    (root / ".pulumi" / "stacks" / "npa-fleet").mkdir(parents=True)
    (root / ".pulumi" / "meta.yaml").write_text("version: 1\n")
    for name in ("f.p.c", "f.p"):
        (root / ".pulumi" / "stacks" / "npa-fleet" / f"{name}.json").write_text("{}")
    listing = '[{"name": "organization/npa-fleet/f.p.c"}, {"name": "f.p"}, {"name": "f.p"}]'
    engine = _engine(tmp_path, monkeypatch, f"echo '{listing}'")
    assert stack_names(f"file://{root}", engine=engine) == ["f.p", "f.p.c"]  # the files: no engine
    assert not (tmp_path / "args").exists()
    assert stack_names("gs://state") == []  # no engine given: none
    assert stack_names("gs://state", engine=engine) == ["f.p", "f.p.c"]  # plain names, once each
    assert (tmp_path / "args").read_text().split() == ["stack", "ls", "--json", "--project", "npa-fleet"]


@pytest.mark.usefixtures("isolated_home")
def test_stack_names_says_when_the_engine_cannot_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(tmp_path, monkeypatch, "echo 'error: no credentials' >&2; exit 255")
    with pytest.raises(StackListingFailed, match="pulumi stack ls failed: error: no credentials"):
        stack_names("gs://state", engine=engine)
