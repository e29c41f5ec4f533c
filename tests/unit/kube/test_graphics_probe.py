"""The graphics readiness probe tells an image that lacks what it runs (`probe-image-incomplete`) apart from a
GPU that fails it: its script checks for python3 and vulkaninfo first (run here with bash, on a PATH that
lacks one), and a container whose shell could not start is the image's fault too; the publication and the
gate's reason say `probe-image-incomplete`, never a graphics failure."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.kube.gpu_health.probes import (
    GRAPHICS_SCRIPT,
    PROBE_IMAGE_INCOMPLETE,
    graphics_missing,
    probe_image_missing,
)
from npa_pulumi.output.evidence import publish_graphics


def _run_script(tmp_path: Path, tools: dict[str, str]) -> tuple[int, str]:
    """The probe's script under bash, with only `tools` (name -> a script body) and the coreutils it pipes
    through on PATH; its termination message goes to a file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("tail", "tee"):
        found = shutil.which(name)
        assert found, name
        (bin_dir / name).symlink_to(found)
    for name, body in tools.items():
        tool = bin_dir / name
        tool.write_text(f"#!{shutil.which('bash')}\n{body}\n")
        tool.chmod(0o755)
    log = tmp_path / "termination-log"
    script = GRAPHICS_SCRIPT.replace("/dev/termination-log", str(log))
    bash = shutil.which("bash")
    assert bash
    proc = subprocess.run([bash, "-c", script], env={"PATH": str(bin_dir)}, capture_output=True, text=True)
    return proc.returncode, log.read_text()


@pytest.mark.skipif(not shutil.which("bash"), reason="the probe's script is bash")
def test_an_image_without_vulkaninfo_is_reported_incomplete(tmp_path: Path) -> None:
    code, output = _run_script(tmp_path, {"python3": "exit 0"})
    assert code == 3
    assert probe_image_missing(output, {"exitCode": code}) == ["vulkaninfo"]


@pytest.mark.skipif(not shutil.which("bash"), reason="the probe's script is bash")
def test_an_image_without_either_tool_names_both(tmp_path: Path) -> None:
    code, output = _run_script(tmp_path, {})
    assert code == 3 and probe_image_missing(output, {"exitCode": code}) == ["python3", "vulkaninfo"]


@pytest.mark.skipif(not shutil.which("bash"), reason="the probe's script is bash")
def test_a_driver_library_that_does_not_load_is_a_gpu_failure_not_the_image(tmp_path: Path) -> None:
    """The tools are there; GLX fails to load (the driver's libraries were not injected): a graphics
    failure, with the missing marker named."""
    failing_python = 'echo "OSError: libGLX_nvidia.so.0: cannot open shared object file" >&2; exit 1'
    code, output = _run_script(tmp_path, {"python3": failing_python, "vulkaninfo": "exit 0"})
    assert code != 0
    assert probe_image_missing(output, {"exitCode": code}) == []
    assert "NPA_GLX_LOADED" in graphics_missing(output)


def test_a_shell_that_could_not_start_is_the_image() -> None:
    assert probe_image_missing("", {"reason": "StartError", "exitCode": 128})
    assert probe_image_missing("bash: tail: command not found", {"exitCode": 127})
    assert probe_image_missing("ERROR: vkEnumeratePhysicalDevices failed", {"exitCode": 1}) == []


def test_the_publication_says_probe_image_incomplete_not_graphics() -> None:
    node = "computeinstance-e00aaaa1111"
    worker = {
        "cuda": {"passed": True},
        "graphics": {
            "passed": False,
            "missing": [],
            "category": PROBE_IMAGE_INCOMPLETE,
            "image_lacks": ["vulkaninfo"],
        },
    }
    published = publish_graphics({"passed": False, "expected_workers": 1, "workers": {node: worker}})
    assert published.summary["failure_categories"] == {PROBE_IMAGE_INCOMPLETE: 1}
    assert published.error is not None and PROBE_IMAGE_INCOMPLETE in published.error
    assert node not in published.error and "graphics (" not in published.error


def test_the_script_checks_the_tools_before_running_them() -> None:
    check = GRAPHICS_SCRIPT.index("command -v")
    assert check < GRAPHICS_SCRIPT.index("python3 -c") < GRAPHICS_SCRIPT.index("vulkaninfo --summary")
    assert os.path.basename("/dev/termination-log") in GRAPHICS_SCRIPT


class _FinishedPod:
    """An API where the created pod has already ended with `terminated` (and is gone once deleted)."""

    def __init__(self, phase: str, terminated: dict[str, object]) -> None:
        self.phase, self.terminated, self.deleted = phase, terminated, False

    def request(
        self, method: str, path: str, body: object = None, content_type: str = ""
    ) -> dict[str, object]:
        if method == "POST":
            assert isinstance(body, dict)
            return {"metadata": {**body["metadata"], "uid": "uid-probe"}}
        if method == "DELETE":
            self.deleted = True
        return {}

    def get(self, path: str) -> dict[str, object]:
        status = {"phase": self.phase, "containerStatuses": [{"state": {"terminated": self.terminated}}]}
        return {"metadata": {"uid": "uid-probe"}, "status": status}

    def get_or_none(self, path: str) -> dict[str, object] | None:
        return None if self.deleted else self.get(path)


def _graphics_config() -> Any:
    from npa_pulumi.kube.gpu_health.config import GateConfig

    return GateConfig(
        expected_nodes=1,
        expected_gpu_nodes=1,
        gpus_per_node=1,
        gpu_platform="gpu-rtx6000",
        driver_mode="operator",
        nvswitch=False,
        stabilization_s=0.0,
        timeout_s=30.0,
        cuda_smoke=True,
        smoke_image="cuda",
        graphics_smoke=True,
        graphics_image="registry.example/render@sha256:" + "a" * 64,
    )


def test_the_probe_result_of_an_incomplete_image_names_what_it_lacks() -> None:
    import time
    from typing import cast

    from npa_pulumi.kube.client import KubeClient
    from npa_pulumi.kube.gpu_health.probes import run_smoke

    def client(api: _FinishedPod) -> KubeClient:
        return cast(KubeClient, api)

    api = _FinishedPod("Failed", {"exitCode": 3, "message": "NPA_PROBE_MISSING vulkaninfo\n"})
    result = run_smoke(
        client(api), _graphics_config(), "node-a", time.monotonic() + 10, time.monotonic, "graphics"
    )
    assert result["category"] == PROBE_IMAGE_INCOMPLETE and result["image_lacks"] == ["vulkaninfo"]
    assert result["missing"] == [] and result["passed"] is False and result["cleaned_up"] is True
    # the same exit on a GPU without a Vulkan device is a graphics failure, with what is missing
    no_device = "NPA_GLX_LOADED\nNPA_EGL_LOADED\nERROR: vkEnumeratePhysicalDevices: no Vulkan device"
    api = _FinishedPod("Failed", {"exitCode": 1, "message": no_device})
    result = run_smoke(
        client(api), _graphics_config(), "node-a", time.monotonic() + 10, time.monotonic, "graphics"
    )
    assert "category" not in result and "a Vulkan physical device (GPU<n>:)" in result["missing"]
