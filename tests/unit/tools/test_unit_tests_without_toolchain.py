"""`make check` needs only the virtualenv: tests/unit/conftest.py hides the toolchain from every unit test
not marked `integration`, so one that resolves it without the mark fails on every machine (issue 60)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from npa_pulumi.runtime import toolchain


def _under(path: Path, root: Path) -> bool:
    path, root = path.resolve(), root.resolve()
    return path == root or root in path.parents


def _on_path(name: str) -> Path | None:
    found = shutil.which(name)
    return Path(found) if found else None


def test_an_unmarked_unit_test_sees_no_toolchain_that_make_tools_provides() -> None:
    assert not toolchain.tools_bin().exists()
    assert not toolchain._cache_root().exists()
    for directory in os.environ["PATH"].split(os.pathsep):
        assert not _under(Path(directory), toolchain.TOOLS_BIN.parent), directory
    for name in ("NPA_PULUMI_BIN", "NPA_TERRAFORM_BIN", toolchain.KUBE_BIN_DIR_ENV, "NPA_KUBERAY_BIN"):
        assert name not in os.environ
    assert toolchain.find_kuberay_operator() == _on_path(toolchain.KUBERAY_OPERATOR)
    assert toolchain.find_kube_binary("kwok") == _on_path("kwok")


def test_the_engine_is_missing_unless_the_machine_itself_has_one() -> None:
    if shutil.which("pulumi"):
        assert toolchain.choose_pulumi().source == "path"
    else:
        with pytest.raises(toolchain.ToolchainMissing):
            toolchain.find_pulumi()


@pytest.mark.integration
def test_a_test_marked_integration_keeps_the_toolchain() -> None:
    hidden = [os.environ.get(name, "") for name in ("NPA_TOOLS_BIN", "XDG_CACHE_HOME")]
    assert not any("no-toolchain" in value for value in hidden)
