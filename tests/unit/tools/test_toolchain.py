"""The toolchain pins: one place (tools/pins.toml, which the package reads too), the SDK agrees with the
engine, the engine reports the pin; and the toolchain script (tools/toolchainlib) by its parts."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pulumi
import pytest

from npa_pulumi.engine.automation.workspace import engine_env
from npa_pulumi.runtime.toolchain import find_pulumi, find_terraform
from tools.toolchainlib import (
    common,
    kuberay,
    kubernetes,
    kubernetes_provider,
    kwok,
    lanes,
    registry,
    seaweedfs,
    tofu,
)
from tools.toolchainlib import pulumi as engine_tools

REPO = Path(__file__).resolve().parents[3]
PINS = tomllib.loads((REPO / "tools" / "pins.toml").read_text())


def test_no_toolchain_pin_is_written_in_the_package() -> None:
    """tools/pins.toml is the one place a toolchain version is written: the package reads it
    (npa_pulumi.runtime.pins), so none of its values appears in the package's code."""
    values = {
        f"[{tool}] {key}": value
        for tool, table in PINS.items()
        for key, value in table.items()
        if re.search(r"\d+\.\d+", value)
    }
    written = [
        f"{path.relative_to(REPO)}: {name} {value}"
        for root in ("npa_pulumi", "components", "policies")
        for path in sorted((REPO / root).rglob("*.py"))
        for name, value in values.items()
        if re.search(rf"(?<![\w.])v?{re.escape(value)}(?![\w.])", path.read_text())
    ]
    assert written == [], "read these from npa_pulumi.runtime.pins instead"


def test_python_sdk_pin_matches_engine_pin() -> None:
    """pip reads the SDK pins from pyproject.toml, so they are written there too, and checked here."""
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


@pytest.mark.integration  # engine_env() resolves the built engine
def test_engine_env_is_offline_and_uses_this_python() -> None:
    env = engine_env()
    assert env["PULUMI_SKIP_UPDATE_CHECK"] == "true"
    assert env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    wrapper = Path(env["PULUMI_PYTHON_CMD"])
    assert os.access(wrapper, os.X_OK)
    assert f"{sys.executable} -u -m npa_pulumi.runtime.plugin_host" in wrapper.read_text()
    path = env["PATH"].split(os.pathsep)
    guard = [d for d in path if Path(d).name.startswith("guarded-")]
    # First the guarded Kubernetes provider (when it is built), then the engine's own directory: where the
    # binary really lives, not a link's (.tools/bin holds the unguarded provider too).
    assert path[len(guard[:1])] == str(find_pulumi().resolve().parent)
    assert guard[:1] == path[:1] or not guard


@pytest.mark.integration
def test_terraform_is_recent_enough() -> None:
    out = subprocess.run(
        [str(find_terraform()), "version", "-json"], capture_output=True, text=True, check=True
    )
    version = tuple(int(x) for x in re.findall(r"\d+", json.loads(out.stdout)["terraform_version"])[:3])
    minimum = tuple(int(x) for x in PINS["terraform"]["min_version"].split("."))
    assert version >= minimum


@pytest.mark.integration
def test_toolchain_script_is_idempotent(tmp_path: Path) -> None:
    """A second `ensure` finds everything in place and says so instead of rebuilding (the first is `make
    tools`, which `make test` runs first; `make check` needs no toolchain, so this is not part of it)."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "toolchain.py"), "ensure", "pulumi", "terraform"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "building" not in proc.stderr
    assert "nothing to do" in proc.stderr or "from PATH" in proc.stderr


# ---------------------------------------------------------------------------- Kubernetes toolchain


def test_kubernetes_sdk_pin_matches_the_plugin_pin() -> None:
    from importlib.metadata import version

    pyproject = (REPO / "pyproject.toml").read_text()
    match = re.search(r'"pulumi-kubernetes==([0-9.]+)"', pyproject)
    assert match, "pyproject must pin the pulumi-kubernetes SDK exactly"
    assert match.group(1) == PINS["pulumi_kubernetes"]["version"]
    assert version("pulumi-kubernetes") == PINS["pulumi_kubernetes"]["version"]


def test_the_kubernetes_sdk_asks_the_engine_for_the_pinned_plugin() -> None:
    """The SDK names its plugin version in pulumi-plugin.json: the engine looks for exactly that one."""
    import pulumi_kubernetes

    plugin = json.loads((Path(pulumi_kubernetes.__file__).parent / "pulumi-plugin.json").read_text())
    assert plugin["name"] == "kubernetes"
    assert plugin["version"] == PINS["pulumi_kubernetes"]["version"]


def test_kubernetes_wrapper_replaces_every_staging_module() -> None:
    upstream = (
        "module k8s.io/kubernetes\n\ngo 1.24.0\n\ngodebug default=go1.24\n\nreplace (\n"
        "\tk8s.io/api => ./staging/src/k8s.io/api\n"
        "\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n"
        "\tgithub.com/other/thing => github.com/fork/thing v1.0.0\n)\n"
    )
    gomod = kubernetes.kubernetes_wrapper_gomod("1.34.4", "3.6.4", upstream)
    assert "\tk8s.io/api => k8s.io/api v0.34.4\n" in gomod
    assert "\tk8s.io/client-go => k8s.io/client-go v0.34.4\n" in gomod
    assert "github.com/other/thing" not in gomod  # only the staging directories are replaced
    assert "godebug default=go1.24" in gomod and "\ngo 1.24.0\n" in gomod
    assert "\tk8s.io/kubernetes v1.34.4\n" in gomod and "\tgo.etcd.io/etcd/server/v3 v3.6.4\n" in gomod


def test_committed_kubernetes_wrapper_matches_the_pins() -> None:
    """tools/kubernetes/go.mod is what gen-kubernetes-wrapper writes for the pinned release."""
    committed = (REPO / "tools" / "kubernetes" / "go.mod").read_text()
    version = PINS["kubernetes"]["version"]
    assert f"\tk8s.io/kubernetes v{version}\n" in committed
    assert f"\tgo.etcd.io/etcd/server/v3 v{PINS['kubernetes']['etcd_version']}\n" in committed
    replaced = re.findall(r"^\t(k8s\.io/[\w.-]+) => \1 v0\.(\d+\.\d+)$", committed, re.M)
    assert len(replaced) >= 30
    assert {minor for _, minor in replaced} == {version.split(".", 1)[1]}
    assert kubernetes.staging_replaces("replace k8s.io/api => ./staging/src/k8s.io/api\n") == ["k8s.io/api"]


def test_committed_seaweedfs_wrapper_requires_the_pin() -> None:
    """tools/seaweedfs/go.mod requires exactly the pinned SeaweedFS and repeats the replace its build needs
    (Go ignores a dependency's replaces); a wrapper out of step with the pin is refused before a build."""
    sw = PINS["seaweedfs"]
    committed = (REPO / "tools" / "seaweedfs" / "go.mod").read_text()
    assert seaweedfs.wrapper_requirement(committed, sw["module"]) == sw["module_version"]
    assert "replace github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0" in committed
    gosum = (REPO / "tools" / "seaweedfs" / "go.sum").read_text()
    assert f"{sw['module']} {sw['module_version']} h1:" in gosum
    stale = {"seaweedfs": {**sw, "module_version": "v0.0.0-20200101000000-000000000000"}}
    with pytest.raises(common.ToolchainError, match=r"tools/seaweedfs/go\.mod requires .* but tools/pins"):
        seaweedfs.check_wrapper(stale)
    block = f"require (\n\tgithub.com/other v1.0.0\n\t{sw['module']} v0.1.2 // indirect\n)\n"
    assert seaweedfs.wrapper_requirement(block, sw["module"]) == "v0.1.2"
    assert seaweedfs.wrapper_requirement("module x\n", sw["module"]) is None


@pytest.mark.integration
def test_kubernetes_binaries_report_the_pinned_versions() -> None:
    from npa_pulumi.simulator.kube import binaries

    found = binaries.require_all()
    version = PINS["kubernetes"]["version"]
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        out = subprocess.run([str(found[name]), "--version"], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == f"Kubernetes v{version}", name
    etcd = subprocess.run([str(found["etcd"]), "--version"], capture_output=True, text=True, check=True)
    assert f"etcd Version: {PINS['kubernetes']['etcd_version']}" in etcd.stdout
    kwokctl = subprocess.run([str(found["kwokctl"]), "--version"], capture_output=True, text=True, check=True)
    assert PINS["kwok"]["version"] in kwokctl.stdout
    stages = found["kwok"].resolve().parent / "stages"
    assert (stages / "node-fast-node-initialize.yaml").is_file(), "kwok's own stages ship beside it"


@pytest.mark.integration
def test_the_kubernetes_plugin_reports_the_sdk_version() -> None:
    """Start the built plugin and ask it over gRPC, as the engine does: its version is the SDK's."""
    from importlib.metadata import version

    import grpc
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

    from npa_pulumi.runtime.toolchain import find_kubernetes_provider

    binary = find_kubernetes_provider()
    assert binary is not None, "make tools builds pulumi-resource-kubernetes"
    proc = subprocess.Popen([str(binary)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().strip())
        options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]  # the schema is ~5 MB
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            info = stub.GetPluginInfo(empty_pb2.Empty(), timeout=30)
            schema = json.loads(stub.GetSchema(provider_pb2.GetSchemaRequest(), timeout=60).schema)
    finally:
        proc.kill()
        proc.wait()
    assert info.version == version("pulumi-kubernetes") == PINS["pulumi_kubernetes"]["version"]
    assert schema["name"] == "kubernetes" and schema["version"] == info.version


@pytest.mark.integration
def test_the_kubernetes_plugin_runs_guarded_first_on_the_engines_path() -> None:
    """The engine finds `pulumi-resource-kubernetes` on PATH; the first one it finds is the guard that
    stops the plugin with its run (npa_pulumi/runtime/plugin_guard.py), which runs the real binary."""
    import shutil

    from npa_pulumi.runtime.toolchain import find_kubernetes_provider

    provider = find_kubernetes_provider()
    assert provider is not None, "make tools builds pulumi-resource-kubernetes"
    found = shutil.which("pulumi-resource-kubernetes", path=engine_env()["PATH"])
    assert found is not None and Path(found).parent.name.startswith("guarded-")
    script = Path(found).read_text()
    assert "-m npa_pulumi.runtime.plugin_guard" in script and str(provider.resolve()) in script
    # The engine puts its own directory first on its plugins' PATH: no unguarded provider may live there.
    from npa_pulumi.engine.automation.workspace import pulumi_command

    engine_dir = Path(pulumi_command().command).parent
    assert not (engine_dir / "pulumi-resource-kubernetes").exists(), engine_dir


def test_the_go_builds_run_two_at_a_time_and_all_finish() -> None:
    """Two lanes: two builds run at once (each waits for the other at a barrier, which one lane would never
    reach), the rest follow, and a failing build is reported after the others have ended."""
    import threading

    barrier = threading.Barrier(2, timeout=10)
    done: list[str] = []

    def step(name: str, meet: bool = False, fail: bool = False) -> Any:
        def run() -> None:
            if meet:
                barrier.wait()
            if fail:
                raise common.ToolchainError(f"{name} failed")
            done.append(name)

        return run

    lanes.run_go_builds([step("a", meet=True), step("b", meet=True), step("c")], lanes=2)
    assert sorted(done) == ["a", "b", "c"]
    done.clear()
    with pytest.raises(common.ToolchainError, match="x failed"):
        lanes.run_go_builds([step("x", fail=True), step("y"), step("z")], lanes=2)
    assert sorted(done) == ["y", "z"]


def test_the_number_of_build_lanes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPA_TOOLCHAIN_LANES", "1")
    assert lanes.build_lanes() == 1
    for wrong in ("0", "two"):
        monkeypatch.setenv("NPA_TOOLCHAIN_LANES", wrong)
        with pytest.raises(common.ToolchainError, match="NPA_TOOLCHAIN_LANES"):
            lanes.build_lanes()
    monkeypatch.delenv("NPA_TOOLCHAIN_LANES")
    monkeypatch.setattr(lanes, "available_memory_gb", lambda: 4.0)
    assert lanes.build_lanes() == 1  # two builds at once would not fit
    monkeypatch.setattr(lanes, "available_memory_gb", lambda: 20.0)
    assert lanes.build_lanes() == (2 if (os.cpu_count() or 1) >= 2 else 1)


# ------------------------------------------------------------------- the toolchain script's parts


def test_every_component_is_one_registry_entry() -> None:
    """`ensure` provides what the registry lists: `all` is every component but chromium; the others run
    first in the order listed (the virtualenv first: the KubeRay build converts its CRDs with it), then
    the Go builds, longest first."""
    assert registry.names() == (
        "venv",
        "pulumi",
        "terraform",
        "kubernetes",
        "kwok",
        "kuberay",
        "pulumi-kubernetes",
        "localcloud-providers",
        "seaweedfs",
        "chromium",
    )
    assert registry.default() == set(registry.names()) - {"chromium"}
    assert [c.name for c in registry.first_steps(set(registry.names()))] == ["venv", "terraform", "chromium"]
    builds = [c.name for c in registry.go_builds(registry.default())]
    assert builds == [
        "pulumi-kubernetes",
        "seaweedfs",
        "kubernetes",
        "pulumi",
        "kwok",
        "kuberay",
        "localcloud-providers",
    ]


def test_an_unknown_component_is_refused_with_the_known_ones_named() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "toolchain.py"), "ensure", "nonesuch"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "unknown component(s): nonesuch; expected all, venv, pulumi, terraform," in proc.stderr


def test_the_cache_directories_are_named_by_the_pins() -> None:
    """A new pin builds into a new directory, the same pins find the same one. These names are what the
    machines' caches hold (a rename would rebuild ~40 minutes), and npa_pulumi.runtime.toolchain finds
    the binaries by their prefixes."""
    machine = f"{sys.platform}-{platform.machine()}"
    p, k, pk = PINS["pulumi"], PINS["kubernetes"], PINS["pulumi_kubernetes"]
    assert (
        engine_tools.pulumi_key(PINS)
        == f"pulumi-v{p['version']}-shim{p['policy_shim_sdk_version']}-{machine}"
    )
    assert tofu.opentofu_key(PINS) == f"opentofu-v{PINS['opentofu']['version']}-{machine}"
    assert kubernetes.kubernetes_key(PINS) == f"kubernetes-v{k['version']}-etcd{k['etcd_version']}-{machine}"
    assert kwok.kwok_key(PINS) == f"kwok-v{PINS['kwok']['version']}-{machine}"
    assert kuberay.kuberay_key(PINS) == f"kuberay-v{PINS['kuberay']['version']}-{machine}"
    assert seaweedfs.seaweedfs_key(PINS) == f"seaweedfs-{PINS['seaweedfs']['module_version']}-{machine}"
    assert kubernetes_provider.provider_key(PINS) == (
        f"pulumi-kubernetes-v{pk['version']}-{pk['provider_module_version']}-{machine}"
    )


def test_a_build_lands_in_the_cache_whole_and_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    go = tmp_path / "go-bin" / "go"  # a build needs Go on PATH; this one never runs
    go.parent.mkdir()
    go.write_text("#!/bin/sh\nexit 1\n")
    go.chmod(0o755)
    monkeypatch.setenv("PATH", f"{go.parent}{os.pathsep}{os.environ['PATH']}")
    staged: list[Path] = []

    def build(out: Path) -> None:
        staged.append(out)
        (out / "tool").write_text("#!/bin/sh\n")
        (out / "tool").chmod(0o755)

    home = tmp_path / "cache" / "tool-v1"
    bindir = common.build_into_cache(home, ("tool",), build, "tool v1")
    assert bindir == home / "bin" and os.access(bindir / "tool", os.X_OK)
    assert (bindir / ".complete").read_text().startswith("built in ")
    assert staged[0] != bindir and not staged[0].exists()  # built aside, then moved into place
    assert common.build_into_cache(home, ("tool",), build, "tool v1") == bindir
    assert len(staged) == 1
    assert f"tool v1 already built in {bindir} (nothing to do)" in capsys.readouterr().err

    broken = tmp_path / "cache" / "broken-v1"
    with pytest.raises(common.ToolchainError, match="broken: the build did not produce broken"):
        common.build_into_cache(broken, ("broken",), lambda out: None, "broken")
    assert not (broken / "bin").exists() and [p.name for p in broken.iterdir()] == [".lock"]

    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    with pytest.raises(common.ToolchainError, match=r"^install Go or the tool$"):
        common.build_into_cache(
            tmp_path / "cache" / "x", ("x",), build, "x", without_go="install Go or the tool"
        )
