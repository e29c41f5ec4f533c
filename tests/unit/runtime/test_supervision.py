"""runtime/supervision.py in a process that serves providers itself: its children run in process groups of
their own, write to files rather than pipes, and get exactly one SIGINT when that process dies however it
dies (a guard shell per child, runtime/supervision.py `_Guard`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# Binding is for the life of a process, so each test binds a process of its own, never pytest's.
pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists() or shutil.which("sh") is None, reason="needs procfs and a shell"
)


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] in "ZX"


def test_a_bound_child_runs_in_a_group_of_its_own_and_its_output_comes_back(tmp_path: Path) -> None:
    child = "import os, sys; print(os.getpgid(0) == os.getpid()); print('err', file=sys.stderr); sys.exit(3)"
    owner = textwrap.dedent(
        f"""
        import json, os, sys
        from pathlib import Path
        from npa_pulumi.runtime import supervision
        assert supervision.bind_children_to_this_process()
        done = supervision.run([sys.executable, "-c", {child!r}], Path.cwd(), os.environ)
        print(json.dumps([done.returncode, done.stdout, done.stderr, len(supervision._running)]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", owner], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert out.returncode == 0, out.stderr
    code, stdout, stderr, still_running = json.loads(out.stdout)
    assert code == 3
    assert stdout.strip() == "True"  # its own process group: a Ctrl-C to its owner's does not reach it
    assert stderr.strip() == "err"
    assert still_running == 0  # unregistered, and its guard gone, once it ended


def test_a_bound_child_gets_one_sigint_when_its_owner_is_killed(tmp_path: Path) -> None:
    """The owner (a process that bound its children, like the orchestrator, with many threads) runs a child
    through `run` from a worker thread and is SIGKILLed: the child gets exactly one SIGINT (the kernel's
    parent-death signal would have come again at every reparenting while the owner's threads died), and can
    still write to its output (a file, not a pipe whose reader died with the owner)."""
    marks = tmp_path / "marks"
    child = textwrap.dedent(
        f"""
        import os, signal, sys, time
        marks = open({str(marks)!r}, "a", buffering=1)
        count = 0
        def on_int(signum, frame):
            global count
            count += 1
            marks.write(f"sigint {{count}}\\n")
        signal.signal(signal.SIGINT, on_int)
        marks.write(f"started {{os.getpid()}}\\n")
        deadline = time.monotonic() + 60
        while count == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)  # a second SIGINT (terraform's "exit immediately") would show here
        print("still writing after the owner died", flush=True)  # SIGPIPE here if stdout were a pipe
        marks.write("wrote\\n")
        """
    )
    owner = textwrap.dedent(
        f"""
        import os, sys, threading, time
        from pathlib import Path
        from npa_pulumi.runtime import supervision
        assert supervision.bind_children_to_this_process()
        for _ in range(8):  # idle threads, as a server's pool has
            threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
        here = Path({str(tmp_path)!r})
        def work():
            done = supervision.run([sys.executable, "-c", {child!r}], here, os.environ)
            (here / "out").write_text(done.stdout)  # never: the owner dies first
        threading.Thread(target=work).start()
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", owner], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "started" not in (marks.read_text() if marks.exists() else ""):
            assert proc.poll() is None and time.monotonic() < deadline, "the child never started"
            time.sleep(0.05)
        pid = int(marks.read_text().split()[1])
        time.sleep(0.5)
        assert "sigint" not in marks.read_text()  # alive and unsignalled while its owner lives
        assert os.getpgid(pid) == pid  # a group of its own: the kill of the owner's group misses it
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the owner's whole group, as CI cancelling a job
        proc.wait()
    deadline = time.monotonic() + 30
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid), "the child outlived its owner"
    lines = marks.read_text().splitlines()
    assert lines[1:] == ["sigint 1", "wrote"], lines
    assert not (tmp_path / "out").exists()
