"""The user's own Pulumi (issue 32, item 2): a `pulumi` on PATH in the supported range is used, one outside
it is refused with the range named, and NPA_STRICT_TOOLCHAIN=1 keeps the exact pin. The numbers agree
with tools/pins.toml, and the toolchain script decides the same way."""

from __future__ import annotations

import importlib.util
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.runtime import toolchain

REPO = Path(__file__).resolve().parents[2]
PINS = tomllib.loads((REPO / "tools" / "pins.toml").read_text())


def fake_pulumi(directory: Path, version: str) -> Path:
    """A `pulumi` that reports `version`, with the helper scripts an official distribution ships."""
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / "pulumi"
    binary.write_text(f"#!/bin/sh\necho v{version}\n")
    binary.chmod(0o755)
    for helper in ("pulumi-language-python-exec", "pulumi-resource-pulumi-python"):
        (directory / helper).write_text("#!/bin/sh\n")
        (directory / helper).chmod(0o755)
    return binary


@pytest.fixture
def only_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No .tools/bin, no toolchain cache, no override: the engine can come only from PATH."""
    monkeypatch.setattr(toolchain, "TOOLS_BIN", tmp_path / "no-tools")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "npa"))
    monkeypatch.delenv("NPA_PULUMI_BIN", raising=False)
    monkeypatch.delenv(toolchain.STRICT_ENV, raising=False)
    bindir = tmp_path / "user-bin"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}/usr/bin:/bin")
    return bindir


def test_runtime_numbers_are_the_pins() -> None:
    assert PINS["pulumi"]["version"] == toolchain.PULUMI_PIN
    assert PINS["pulumi"]["supported_min"] == toolchain.PULUMI_SUPPORTED_MIN
    assert PINS["pulumi"]["supported_below"] == toolchain.PULUMI_SUPPORTED_BELOW
    assert PINS["pulumi_kubernetes"]["version"] == toolchain.KUBERNETES_PROVIDER_VERSION
    low, pin, high = (
        toolchain.parse_version(v)
        for v in (toolchain.PULUMI_SUPPORTED_MIN, toolchain.PULUMI_PIN, toolchain.PULUMI_SUPPORTED_BELOW)
    )
    assert low is not None and pin is not None and high is not None
    assert low <= pin < high


def test_another_supported_version_on_path_is_used(only_path: Path) -> None:
    binary = fake_pulumi(only_path, "3.230.1")
    choice = toolchain.choose_pulumi()
    assert (choice.path, choice.source, choice.version) == (binary, "path", "v3.230.1")
    assert toolchain.find_pulumi() == binary


@pytest.mark.parametrize("version", ["3.100.0", "4.0.0", "2.25.2"])
def test_a_version_outside_the_range_is_refused_with_the_range_named(only_path: Path, version: str) -> None:
    fake_pulumi(only_path, version)
    with pytest.raises(toolchain.ToolchainUnsupported) as refused:
        toolchain.find_pulumi()
    message = str(refused.value)
    assert f"v{version}" in message
    assert f">= v{PINS['pulumi']['supported_min']}, < v{PINS['pulumi']['supported_below']}" in message


def test_strict_toolchain_accepts_only_the_pin(only_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(toolchain.STRICT_ENV, "1")
    fake_pulumi(only_path, "3.230.1")
    with pytest.raises(toolchain.ToolchainUnsupported, match=f"exactly v{toolchain.PULUMI_PIN}"):
        toolchain.find_pulumi()
    binary = fake_pulumi(only_path, toolchain.PULUMI_PIN)
    assert toolchain.find_pulumi() == binary


def test_no_pulumi_at_all_says_what_to_install(only_path: Path) -> None:
    with pytest.raises(toolchain.ToolchainMissing, match=r"install pulumi \(>= v"):
        toolchain.find_pulumi()


def test_a_plugin_installed_by_pulumi_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolchain, "TOOLS_BIN", tmp_path / "no-tools")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("NPA_KUBERNETES_PROVIDER_BIN", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "pulumi-home"))
    assert toolchain.find_kubernetes_provider() is None
    assert toolchain.kubernetes_plugin_install_command() == (
        f"pulumi plugin install resource kubernetes v{PINS['pulumi_kubernetes']['version']}"
    )
    plugin_dir = (
        tmp_path / "pulumi-home" / "plugins" / f"resource-kubernetes-v{toolchain.KUBERNETES_PROVIDER_VERSION}"
    )
    plugin_dir.mkdir(parents=True)
    plugin = plugin_dir / "pulumi-resource-kubernetes"
    plugin.write_text("#!/bin/sh\n")
    plugin.chmod(0o755)
    assert toolchain.find_kubernetes_provider() == plugin


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("npa_toolchain_range", REPO / "tools" / "toolchain.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_tools_accepts_the_same_range(monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script()
    monkeypatch.delenv("NPA_STRICT_TOOLCHAIN", raising=False)
    assert script.pulumi_accepted(PINS, "v3.230.1")
    assert script.pulumi_accepted(PINS, f"v{PINS['pulumi']['version']}")
    assert not script.pulumi_accepted(PINS, "v4.1.0")
    assert not script.pulumi_accepted(PINS, "unknown")
    monkeypatch.setenv("NPA_STRICT_TOOLCHAIN", "1")
    assert not script.pulumi_accepted(PINS, "v3.230.1")
    assert script.pulumi_accepted(PINS, f"v{PINS['pulumi']['version']}")
    assert "NPA_STRICT_TOOLCHAIN=1" in script.pulumi_range(PINS)


def test_a_missing_plugin_error_names_the_install_command() -> None:
    from npa_pulumi.engine.automation.events import missing_plugin_hint

    engine = (
        "no resource plugin 'pulumi-resource-kubernetes' found in the workspace at version v4.25.0 "
        "or on your $PATH, install the plugin using `pulumi plugin install resource kubernetes v4.25.0`"
    )
    assert "`pulumi plugin install resource kubernetes v4.25.0`" in missing_plugin_hint(engine.split(",")[0])
    assert missing_plugin_hint("some other failure") == "some other failure"


def test_a_foreign_home_reuses_the_accounts_toolchain_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HOME=$(mktemp -d) make demo: the binaries `make tools` built are the machine's, found again."""
    import pwd

    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    account = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "npa-pulumi" / "toolchain"
    expected = (
        account
        if account.is_dir() and os.access(account, os.W_OK)
        else tmp_path / ".cache" / "npa-pulumi" / "toolchain"
    )
    assert toolchain._cache_root() == expected
    assert _script().cache_root() == expected
    (tmp_path / ".cache" / "npa-pulumi" / "toolchain").mkdir(parents=True)  # this $HOME has its own now
    assert toolchain._cache_root() == tmp_path / ".cache" / "npa-pulumi" / "toolchain"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert toolchain._cache_root() == tmp_path / "xdg" / "npa-pulumi" / "toolchain"
