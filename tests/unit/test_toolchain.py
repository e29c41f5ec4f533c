"""The toolchain pins: one place, the SDK agrees with the engine, and the engine reports the pin."""

from __future__ import annotations

import json
import os
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


# ---------------------------------------------------------------------------- Kubernetes toolchain


def _toolchain_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("npa_toolchain_script", REPO / "tools" / "toolchain.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    toolchain: Any = _toolchain_module()
    upstream = (
        "module k8s.io/kubernetes\n\ngo 1.24.0\n\ngodebug default=go1.24\n\nreplace (\n"
        "\tk8s.io/api => ./staging/src/k8s.io/api\n"
        "\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n"
        "\tgithub.com/other/thing => github.com/fork/thing v1.0.0\n)\n"
    )
    gomod = toolchain.kubernetes_wrapper_gomod("1.34.4", "3.6.4", upstream)
    assert "\tk8s.io/api => k8s.io/api v0.34.4\n" in gomod
    assert "\tk8s.io/client-go => k8s.io/client-go v0.34.4\n" in gomod
    assert "github.com/other/thing" not in gomod  # only the staging directories are replaced
    assert "godebug default=go1.24" in gomod and "\ngo 1.24.0\n" in gomod
    assert "\tk8s.io/kubernetes v1.34.4\n" in gomod and "\tgo.etcd.io/etcd/server/v3 v3.6.4\n" in gomod


def test_committed_kubernetes_wrapper_matches_the_pins() -> None:
    """tools/kubernetes/go.mod is what gen-kubernetes-wrapper writes for the pinned release."""
    toolchain: Any = _toolchain_module()
    committed = (REPO / "tools" / "kubernetes" / "go.mod").read_text()
    version = PINS["kubernetes"]["version"]
    assert f"\tk8s.io/kubernetes v{version}\n" in committed
    assert f"\tgo.etcd.io/etcd/server/v3 v{PINS['kubernetes']['etcd_version']}\n" in committed
    replaced = re.findall(r"^\t(k8s\.io/[\w.-]+) => \1 v0\.(\d+\.\d+)$", committed, re.M)
    assert len(replaced) >= 30
    assert {minor for _, minor in replaced} == {version.split(".", 1)[1]}
    assert toolchain.staging_replaces("replace k8s.io/api => ./staging/src/k8s.io/api\n") == ["k8s.io/api"]


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

    toolchain = _toolchain_module()
    barrier = threading.Barrier(2, timeout=10)
    done: list[str] = []

    def step(name: str, meet: bool = False, fail: bool = False) -> Any:
        def run() -> None:
            if meet:
                barrier.wait()
            if fail:
                raise toolchain.ToolchainError(f"{name} failed")
            done.append(name)

        return run

    toolchain.run_go_builds([step("a", meet=True), step("b", meet=True), step("c")], lanes=2)
    assert sorted(done) == ["a", "b", "c"]
    done.clear()
    with pytest.raises(toolchain.ToolchainError, match="x failed"):
        toolchain.run_go_builds([step("x", fail=True), step("y"), step("z")], lanes=2)
    assert sorted(done) == ["y", "z"]


def test_the_number_of_build_lanes(monkeypatch: pytest.MonkeyPatch) -> None:
    toolchain = _toolchain_module()
    monkeypatch.setenv("NPA_TOOLCHAIN_LANES", "1")
    assert toolchain.build_lanes() == 1
    for wrong in ("0", "two"):
        monkeypatch.setenv("NPA_TOOLCHAIN_LANES", wrong)
        with pytest.raises(toolchain.ToolchainError, match="NPA_TOOLCHAIN_LANES"):
            toolchain.build_lanes()
    monkeypatch.delenv("NPA_TOOLCHAIN_LANES")
    monkeypatch.setattr(toolchain, "available_memory_gb", lambda: 4.0)
    assert toolchain.build_lanes() == 1  # two builds at once would not fit
    monkeypatch.setattr(toolchain, "available_memory_gb", lambda: 20.0)
    assert toolchain.build_lanes() == (2 if (os.cpu_count() or 1) >= 2 else 1)
