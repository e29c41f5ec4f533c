"""The toolchain pins: one place, the SDK agrees with the engine, and the engine reports the pin."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pulumi
import pytest

from npa_pulumi.engine.workspace import engine_env
from npa_pulumi.runtime.toolchain import find_pulumi, find_terraform

REPO = Path(__file__).resolve().parents[2]
PINS = tomllib.loads((REPO / "tools" / "pins.toml").read_text())


def test_python_sdk_pin_matches_engine_pin() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    match = re.search(r'"pulumi==([0-9.]+)"', pyproject)
    assert match, "pyproject must pin the Pulumi Python SDK exactly"
    assert match.group(1) == PINS["pulumi"]["version"]


def test_installed_sdk_is_the_pinned_one() -> None:
    from importlib.metadata import version

    assert version("pulumi") == PINS["pulumi"]["version"]
    assert pulumi is not None


@pytest.mark.integration
def test_engine_reports_pinned_version() -> None:
    out = subprocess.run(
        [str(find_pulumi()), "version"],
        env=dict(os.environ, **engine_env()),
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == f"v{PINS['pulumi']['version']}"


@pytest.mark.integration
def test_engine_bundled_helpers_are_executable() -> None:
    real_dir = find_pulumi().resolve().parent
    for name in (
        "pulumi-language-python-exec",
        "pulumi-resource-pulumi-python",
        "pulumi-analyzer-policy-python",
    ):
        helper = real_dir / name
        assert helper.is_file(), f"{name} missing next to the engine"
        assert os.access(helper, os.X_OK), f"{name} is not executable"


def test_engine_env_is_offline_and_uses_this_python() -> None:
    env = engine_env()
    assert env["PULUMI_SKIP_UPDATE_CHECK"] == "true"
    assert env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    wrapper = Path(env["PULUMI_PYTHON_CMD"])
    assert os.access(wrapper, os.X_OK)
    assert f"{sys.executable} -u -m npa_pulumi.runtime.plugin_host" in wrapper.read_text()
    assert env["PATH"].split(os.pathsep)[0] == str(find_pulumi().parent)


@pytest.mark.integration
def test_terraform_is_recent_enough() -> None:
    out = subprocess.run(
        [str(find_terraform()), "version", "-json"], capture_output=True, text=True, check=True
    )
    version = tuple(int(x) for x in re.findall(r"\d+", json.loads(out.stdout)["terraform_version"])[:3])
    minimum = tuple(int(x) for x in PINS["terraform"]["min_version"].split("."))
    assert version >= minimum


def test_toolchain_script_is_idempotent(tmp_path: Path) -> None:
    """A second `ensure` finds everything in place and says so instead of rebuilding."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "toolchain.py"), "ensure", "pulumi", "terraform"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "building" not in proc.stderr
    assert "nothing to do" in proc.stderr or "from PATH" in proc.stderr
