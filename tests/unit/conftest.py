"""The unit tests' own rule: `make check` runs them with only the virtualenv (no `make tools`), so a unit
test that is not marked `integration` runs with the toolchain hidden, on every machine. A test that
resolves the engine, terraform or the Kubernetes binaries without the mark then fails here and now, not
only on a newcomer's fresh clone (issue 60)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from npa_pulumi.runtime import toolchain

# The variables that override where the toolchain lookup (npa_pulumi/runtime/toolchain.py) looks.
TOOLCHAIN_OVERRIDES = (
    "NPA_PULUMI_BIN",
    "NPA_TERRAFORM_BIN",
    "NPA_KUBERNETES_PROVIDER_BIN",
    "NPA_KUBERAY_BIN",
    toolchain.KUBE_BIN_DIR_ENV,
)


def _provided_by_make_tools(directory: str) -> bool:
    """`.tools/bin` (the Makefile puts it first on PATH) or a directory of the toolchain cache. What the
    machine itself has on PATH (a system kubectl or terraform) a fresh clone has too, so it stays."""
    resolved = Path(directory).resolve()
    roots = (toolchain.TOOLS_BIN.parent.resolve(), toolchain._cache_root().resolve())
    return any(resolved == root or root in resolved.parents for root in roots)


def _without_toolchain(path: str) -> str:
    return os.pathsep.join(d for d in path.split(os.pathsep) if d and not _provided_by_make_tools(d))


@pytest.fixture(autouse=True)
def toolchain_hidden(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    """For an unmarked unit test: an empty `.tools/bin`, an empty toolchain cache, no override, and neither
    on PATH: what a fresh clone before `make tools` has."""
    if request.node.get_closest_marker("integration"):
        return
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    path = _without_toolchain(os.environ.get("PATH", ""))  # before the cache root moves
    empty = tmp_path_factory.mktemp("no-toolchain")
    monkeypatch.setenv("NPA_TOOLS_BIN", str(empty / "bin"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(empty / "cache"))
    for name in TOOLCHAIN_OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", path)
