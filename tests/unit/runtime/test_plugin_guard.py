"""The guard in front of the Go plugins the engine starts: the plugin stops when the engine that started
it is killed, and when the guard itself is killed (npa_pulumi/runtime/plugin_guard.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from npa_pulumi.runtime.processes import process_alive


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _wait_for(predicate: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def _start() -> tuple[subprocess.Popen[bytes], int, int]:
    """An `engine` (a shell) that starts the guard in front of a long `sleep` (the plugin)."""
    guard = f"{sys.executable} -m npa_pulumi.runtime.plugin_guard sleep 300"
    engine = subprocess.Popen(["sh", "-c", f"{guard} & wait"], start_new_session=True)
    assert _wait_for(lambda: _children(engine.pid) and _children(_children(engine.pid)[0]))
    guard_pid = _children(engine.pid)[0]
    plugin_pid = _children(guard_pid)[0]
    return engine, guard_pid, plugin_pid


def test_the_plugin_stops_when_its_engine_is_killed() -> None:
    engine, guard_pid, plugin_pid = _start()
    os.kill(engine.pid, signal.SIGKILL)
    engine.wait()
    assert _wait_for(lambda: not process_alive(plugin_pid)), "the plugin outlived its engine"
    assert _wait_for(lambda: not process_alive(guard_pid))


def test_the_plugin_stops_when_its_guard_is_killed() -> None:
    engine, guard_pid, plugin_pid = _start()
    try:
        os.kill(guard_pid, signal.SIGKILL)
        assert _wait_for(lambda: not process_alive(plugin_pid)), "the plugin outlived its guard"
    finally:
        os.killpg(engine.pid, signal.SIGKILL)
        engine.wait()


def test_the_plugins_exit_code_and_output_pass_through(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "npa_pulumi.runtime.plugin_guard", "sh", "-c", "echo 4242; exit 3"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (out.returncode, out.stdout) == (3, "4242\n")


def test_the_plugin_gets_a_private_temporary_directory_that_goes_with_it() -> None:
    """The Kubernetes provider writes the cluster's kubeconfig to a new `$TMPDIR/kubeconfig*` on every
    configure and never removes it: the guard's private TMPDIR takes those files away with the plugin."""
    plugin = 'touch "$TMPDIR/kubeconfig123"; echo "$TMPDIR"; stat -c %a "$TMPDIR"'
    out = subprocess.run(
        [sys.executable, "-m", "npa_pulumi.runtime.plugin_guard", "sh", "-c", plugin],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    private, mode = out.stdout.split()
    assert Path(private).name.startswith("npa-plugin-") and mode == "700"
    assert not Path(private).exists(), "the plugin's temporary files outlived it"


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(
    "started_with", [None, _ignore_sigint], ids=["sigint-default", "sigint-ignored-as-under-nohup"]
)
def test_the_private_temporary_directory_goes_when_the_engine_interrupts_the_plugin(
    tmp_path: Path, started_with: Callable[[], None] | None
) -> None:
    """The engine stops a plugin with SIGINT to its process group (the guard and the plugin), then waits;
    also when the CLI was started in the background of a non-interactive shell, which ignores SIGINT in
    every process it starts (an ignored signal stays ignored across exec)."""
    marker = tmp_path / "tmpdir"
    # The file first, then the marker the test waits for (the other way round, the test could look before
    # the file was made).
    plugin = f'touch "$TMPDIR/kubeconfig1"; echo "$TMPDIR" > {marker}; exec sleep 300'
    guard = subprocess.Popen(
        [sys.executable, "-m", "npa_pulumi.runtime.plugin_guard", "sh", "-c", plugin],
        start_new_session=True,
        preexec_fn=started_with,
    )
    assert _wait_for(lambda: marker.exists() and marker.read_text().strip())
    private = Path(marker.read_text().strip())
    assert (private / "kubeconfig1").exists()
    os.killpg(guard.pid, signal.SIGINT)
    guard.wait(timeout=30)
    assert not private.exists()
