"""terraform/tofu init + apply + output + destroy of a built-in-only module, with a plugin cache dir and
no registry access."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from npa_pulumi.runtime.toolchain import find_terraform

pytestmark = pytest.mark.integration

MODULE = Path(__file__).parent / "support" / "tf_smoke"


def _tf(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(find_terraform()), *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )


def test_terraform_builtin_module_lifecycle(isolated_home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(MODULE, work)
    markers = tmp_path / "markers"
    markers.mkdir()
    cache = tmp_path / "plugin-cache"
    cache.mkdir()
    env = dict(
        os.environ,
        TF_PLUGIN_CACHE_DIR=str(cache),
        TF_IN_AUTOMATION="1",
        TF_INPUT="0",
        TF_VAR_greeting="fleet",
        TF_VAR_marker_dir=str(markers),
    )

    version = json.loads(_tf(["version", "-json"], work, env).stdout)
    assert version["terraform_version"]

    _tf(["init", "-input=false", "-no-color"], work, env)
    _tf(["apply", "-auto-approve", "-input=false", "-no-color"], work, env)
    assert (markers / "created.txt").read_text().strip() == "created-fleet"

    outputs = json.loads(_tf(["output", "-json"], work, env).stdout)
    assert outputs["greeting"]["value"] == "fleet"
    assert json.loads((work / "terraform.tfstate").read_text())["resources"]

    _tf(["destroy", "-auto-approve", "-input=false", "-no-color"], work, env)
    assert (markers / "destroyed.txt").read_text().strip() == "destroyed"
    state = json.loads((work / "terraform.tfstate").read_text())
    assert state["resources"] == []
    assert list(cache.iterdir()) == []  # nothing was downloaded
