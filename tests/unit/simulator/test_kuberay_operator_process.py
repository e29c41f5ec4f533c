"""The local cloud's KubeRay operator process (npa_pulumi/simulator/kube/kuberay.py): started and stopped
with the fleet's operator Deployment, and never outliving the agent that owns it, however it dies. A
stand-in binary (found through NPA_KUBERAY_BIN, as the real one is) keeps this test free of a cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.kube.kuberay import FLEET_MANAGER, MANAGED_BY
from npa_pulumi.runtime.processes import process_alive, wait_while
from npa_pulumi.simulator.kube import kuberay as operator


@pytest.fixture
def fake_operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    binary = bindir / "kuberay-operator"
    binary.write_text("#!/bin/sh\nexec sleep 300\n")
    binary.chmod(0o755)
    monkeypatch.setenv("NPA_KUBERAY_BIN", str(bindir))
    return binary


def _gone(pid: int, timeout_s: float = 5.0) -> bool:
    return wait_while(lambda: process_alive(pid), timeout_s)


def _environ_has(pid: int, entry: bytes, timeout_s: float = 5.0) -> bool:
    """Whether the process's environment holds the entry, once it has exec'd: between fork and exec (and
    for a moment during exec) /proc/PID/environ is the parent's or empty."""
    environ = Path(f"/proc/{pid}/environ")
    return wait_while(lambda: entry not in environ.read_bytes().split(b"\0"), timeout_s)


def test_runs_while_wanted_and_stops_when_not(fake_operator: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    proc = operator.OperatorProcess(tmp_path / "cluster", {"kind": "Config"}, lines.append)
    proc.sync(True)
    pid = proc.pid
    log = tmp_path / "cluster" / "kuberay" / "operator.log"
    why = (
        lines,
        proc.proc and proc.proc.poll(),
        log.read_text() if log.exists() else "",
    )  # seen once, under load
    assert pid is not None and operator.running_pid(tmp_path / "cluster") == pid, why
    kubeconfig = tmp_path / "cluster" / "kuberay" / "kubeconfig"
    assert kubeconfig.stat().st_mode & 0o777 == 0o600
    assert _environ_has(pid, f"KUBECONFIG={kubeconfig}".encode())
    proc.sync(True)
    assert proc.pid == pid  # one operator per cluster
    proc.sync(False)
    assert _gone(pid) and operator.running_pid(tmp_path / "cluster") is None
    assert proc.proc is None


def test_a_crashed_operator_is_restarted(fake_operator: Path, tmp_path: Path) -> None:
    proc = operator.OperatorProcess(tmp_path / "cluster", {}, lambda _m: None)
    proc.sync(True)
    first = proc.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    assert _gone(first)
    proc.last_start = 0.0  # past the back-off
    proc.sync(True)
    assert proc.pid not in (None, first)
    proc.stop()


OWNER = """
import sys, time
from pathlib import Path
from npa_pulumi.simulator.kube import kuberay
proc = kuberay.OperatorProcess(Path(sys.argv[1]), {}, lambda _m: None)
proc.sync(True)
print(proc.pid, flush=True)
time.sleep(300)
"""


def test_the_operator_dies_with_its_owner(fake_operator: Path, tmp_path: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path / "cluster")],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    try:
        assert owner.stdout is not None
        child = int(owner.stdout.readline())
        assert process_alive(child)
        owner.kill()  # SIGKILL: no handler of the owner runs
        owner.wait()
        assert _gone(child), "the operator outlived the agent that started it"
    finally:
        if owner.poll() is None:
            owner.kill()


class FakeClient:
    def __init__(self, deployment: dict[str, Any] | None) -> None:
        self.deployment = deployment

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        assert path == operator.DEPLOYMENT_PATH
        return self.deployment


def test_installed_only_for_the_fleets_live_deployment() -> None:
    ours: dict[str, Any] = {"metadata": {"labels": {MANAGED_BY: FLEET_MANAGER}}, "spec": {"replicas": 1}}
    assert operator.installed(FakeClient(ours))
    assert not operator.installed(FakeClient(None))
    assert not operator.installed(FakeClient({"metadata": {"labels": {}}, "spec": {"replicas": 1}}))
    assert not operator.installed(FakeClient({**ours, "spec": {"replicas": 0}}))
    deleting = {"metadata": {**ours["metadata"], "deletionTimestamp": "now"}, "spec": {"replicas": 1}}
    assert not operator.installed(FakeClient(deleting))
    assert "--metrics-addr=0" in operator.operator_args()  # no listener: clusters share 127.0.0.1
