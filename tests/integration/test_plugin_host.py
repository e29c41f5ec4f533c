"""The engine's Python plugin hosts start through `npa_pulumi.runtime.plugin_host`: a host whose run dies
before it received a single request exits by itself, and anything that is not a plugin host passes
through to the real interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npa_pulumi.engine.workspace import plugin_python_wrapper
from npa_pulumi.runtime.plugin_host import plugin_module


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] in "ZX"  # exited; its new parent may never reap it


def test_plugin_module_recognises_only_plugin_hosts() -> None:
    assert plugin_module(["-u", "-m", "pulumi.dynamic", "127.0.0.1:1"]) == ("pulumi.dynamic", ["127.0.0.1:1"])
    assert plugin_module(["-m", "pulumi.policy", "x", "."]) == ("pulumi.policy", ["x", "."])
    assert plugin_module(["-u", "-m", "http.server"]) is None
    assert plugin_module(["-c", "print(1)"]) is None
    assert plugin_module([]) is None


def test_other_invocations_pass_through(isolated_home: Path) -> None:
    wrapper = plugin_python_wrapper()
    out = subprocess.run([wrapper, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == sys.executable


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs procfs to follow the host")
def test_a_host_whose_run_died_before_any_request_exits(isolated_home: Path) -> None:
    wrapper = plugin_python_wrapper()
    # The "engine": starts a dynamic-provider host, waits for its port line, then is SIGKILLed.
    engine = (
        "import subprocess, sys, time\n"
        f"host = subprocess.Popen([{wrapper!r}, '-u', '-m', 'pulumi.dynamic', '127.0.0.1:1'],"
        " stdout=subprocess.PIPE, start_new_session=True)\n"
        "print(host.pid, flush=True)\n"
        "print('port', host.stdout.readline().decode().strip(), flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", engine], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    host_pid = int(proc.stdout.readline())
    try:
        port_line = proc.stdout.readline().split()
        assert port_line[0] == "port" and port_line[1].isdigit(), port_line  # serving, no request yet
        assert not _gone(host_pid)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 30
        while not _gone(host_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(host_pid), "the plugin host outlived the run that started it"
    finally:
        if not _gone(host_pid):
            os.kill(host_pid, 9)
