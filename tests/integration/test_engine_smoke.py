"""The real Pulumi engine, end to end: stack with tags, an inline program with a Python dynamic provider,
preview, update, outputs (a secret one must stay encrypted in the state file), the plain `pulumi stack ls`
CLI with tag filters, destroy and removal."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pulumi
import pytest
from pulumi import automation as auto

from npa_pulumi.engine.automation.workspace import EngineSettings, select_or_create_stack, workspace_options
from npa_pulumi.runtime.toolchain import find_pulumi

pytestmark = pytest.mark.integration

SUPPORT_DIR = Path(__file__).parent  # holds support/smoke_resources.py for the provider process
SECRET_VALUE = "smoke-secret-do-not-store-plain-1234"


def _program(message: str) -> Callable[[], None]:
    def program() -> None:
        from support.smoke_resources import Echo

        echo = Echo("greeting", message)
        pulumi.export("shout", echo.shout)
        pulumi.export("token", pulumi.Output.secret(SECRET_VALUE))

    return program


def _state_files(backend_dir: Path) -> list[Path]:
    return [p for p in backend_dir.rglob("*.json") if "stacks" in p.parts]


def test_engine_smoke_lifecycle(isolated_home: Path, tmp_path: Path) -> None:
    backend_dir = tmp_path / "backend"
    settings = EngineSettings.resolve(
        backend=f"file://{backend_dir}",
        extra_env={"PYTHONPATH": str(SUPPORT_DIR)},
    )
    passphrase_file = Path(settings.secrets.env["PULUMI_CONFIG_PASSPHRASE_FILE"])
    assert passphrase_file.stat().st_mode & 0o777 == 0o600

    stack = select_or_create_stack(settings, "smoke.dev", _program("hello"), project_name="npa-smoke")
    stack.set_tag("npa:fleet", "smoke")
    stack.set_tag("npa:kind", "cluster")

    preview = stack.preview()
    assert preview.change_summary.get(auto.OpType.CREATE) == 2  # the stack itself and the Echo resource

    result = stack.up()
    assert result.summary.result == "succeeded"
    assert result.outputs["shout"].value == "HELLO"
    assert result.outputs["token"].secret is True
    assert result.outputs["token"].value == SECRET_VALUE

    states = _state_files(backend_dir)
    assert states, "the DIY backend wrote no checkpoint"
    for state in states:
        text = state.read_text()
        assert SECRET_VALUE not in text, f"secret output stored in plaintext in {state}"
    assert any("ciphertext" in s.read_text() for s in states)

    # A second update with a changed input goes through the provider's update path.
    stack2 = select_or_create_stack(settings, "smoke.dev", _program("again"), project_name="npa-smoke")
    result2 = stack2.up()
    assert result2.outputs["shout"].value == "AGAIN"
    assert result2.summary.resource_changes == {"update": 1, "same": 1}

    # The plain CLI sees the stack and its tags against the same backend.
    env = dict(os.environ, **settings.env())
    listing = subprocess.run(
        [str(find_pulumi()), "stack", "ls", "--json", "--tag", "npa:fleet=smoke", "--project", "npa-smoke"],
        cwd=settings.work_dir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    names = [s["name"] for s in json.loads(listing.stdout)]
    assert names == ["smoke.dev"]
    none = subprocess.run(
        [str(find_pulumi()), "stack", "ls", "--json", "--tag", "npa:fleet=other", "--project", "npa-smoke"],
        cwd=settings.work_dir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(none.stdout) == []

    destroyed = stack2.destroy()
    assert destroyed.summary.result == "succeeded"
    stack2.workspace.remove_stack("smoke.dev")
    with pytest.raises(auto.StackNotFoundError):
        auto.select_stack(
            "smoke.dev",
            project_name="npa-smoke",
            program=_program("x"),
            opts=workspace_options(settings, _program("x"), "npa-smoke"),
        )
