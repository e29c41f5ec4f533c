"""The graphics readiness probe tells an image that lacks what it runs (`probe-image-incomplete`) apart from a
GPU that fails it: its script checks for python3 and vulkaninfo first (run here with bash, on a PATH that
lacks one), and a container whose shell could not start is the image's fault too; the publication and the
gate's reason say `probe-image-incomplete`, never a graphics failure."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from npa_pulumi.engine.evidence import publish_graphics
from npa_pulumi.kube.gpu_health.probes import (
    GRAPHICS_SCRIPT,
    PROBE_IMAGE_INCOMPLETE,
    graphics_missing,
    probe_image_missing,
)


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
