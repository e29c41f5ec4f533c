"""The user's own Pulumi (issue 32, item 2): a `pulumi` on PATH in the supported range is used, one outside
it is refused with the range named, and NPA_STRICT_TOOLCHAIN=1 keeps the exact pin. The numbers agree
with tools/pins.toml (the package reads that file), and the toolchain script decides the same way."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from npa_pulumi.runtime import pins, toolchain
from tools.toolchainlib import common as toolchain_common
from tools.toolchainlib import pulumi as engine_tools

REPO = Path(__file__).resolve().parents[3]
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


def test_the_package_reads_the_one_pins_file() -> None:
    """npa_pulumi/data/pins.toml is tools/pins.toml (a link in the checkout; a wheel ships a copy, which
    tests/integration/test_wheel.py checks), and the runtime's numbers are read from it."""
    assert pins.PINS_FILE.resolve() == (REPO / "tools" / "pins.toml").resolve()
    assert toolchain.pulumi_pin() == PINS["pulumi"]["version"]
    assert toolchain.pulumi_supported() == (
        PINS["pulumi"]["supported_min"],
        PINS["pulumi"]["supported_below"],
    )
    assert toolchain.kubernetes_provider_version() == PINS["pulumi_kubernetes"]["version"]
    assert pins.kuberay_operator_image() == PINS["kuberay"]["image"]
    supported_min, supported_below = toolchain.pulumi_supported()
    low, pin, high = (
        toolchain.parse_version(v) for v in (supported_min, toolchain.pulumi_pin(), supported_below)
    )
    assert low is not None and pin is not None and high is not None
    assert low <= pin < high
    with pytest.raises(LookupError, match=r"pins no \[pulumi\] nonesuch"):
        pins.pin("pulumi", "nonesuch")


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
    with pytest.raises(toolchain.ToolchainUnsupported, match=f"exactly v{toolchain.pulumi_pin()}"):
        toolchain.find_pulumi()
    binary = fake_pulumi(only_path, toolchain.pulumi_pin())
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
        tmp_path
        / "pulumi-home"
        / "plugins"
        / f"resource-kubernetes-v{toolchain.kubernetes_provider_version()}"
    )
    plugin_dir.mkdir(parents=True)
    plugin = plugin_dir / "pulumi-resource-kubernetes"
    plugin.write_text("#!/bin/sh\n")
    plugin.chmod(0o755)
    assert toolchain.find_kubernetes_provider() == plugin


def test_make_tools_accepts_the_same_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NPA_STRICT_TOOLCHAIN", raising=False)
    assert engine_tools.pulumi_accepted(PINS, "v3.230.1")
    assert engine_tools.pulumi_accepted(PINS, f"v{PINS['pulumi']['version']}")
    assert not engine_tools.pulumi_accepted(PINS, "v4.1.0")
    assert not engine_tools.pulumi_accepted(PINS, "unknown")
    monkeypatch.setenv("NPA_STRICT_TOOLCHAIN", "1")
    assert not engine_tools.pulumi_accepted(PINS, "v3.230.1")
    assert engine_tools.pulumi_accepted(PINS, f"v{PINS['pulumi']['version']}")
    assert "NPA_STRICT_TOOLCHAIN=1" in engine_tools.pulumi_range(PINS)


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
    assert toolchain_common.cache_root() == expected
    (tmp_path / ".cache" / "npa-pulumi" / "toolchain").mkdir(parents=True)  # this $HOME has its own now
    assert toolchain._cache_root() == tmp_path / ".cache" / "npa-pulumi" / "toolchain"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert toolchain._cache_root() == tmp_path / "xdg" / "npa-pulumi" / "toolchain"
