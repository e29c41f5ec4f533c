"""Terraform must not outlive the run that started it.

The Pulumi engine starts each plugin host (the dynamic providers that run terraform) in a process group
of its own. When a run is killed the way CI cancels a job or a user kills a terminal (SIGKILL to the CLI's
process group), the engine dies but the provider host and its terraform carry on: the terraform keeps the
work dir's state lock, so the next `up` of that cluster fails with "Error acquiring the state lock", and
the host idles forever.

So the provider host watches the run that started it, from its first moment (`plugin_host` starts the
watchdog before the host serves; the components' own `watch_run()` calls cover hosts started without it).
The engine is the host's grandparent (the plugin launcher script is its parent); when either of them is gone
(reparented), the run is over: every running terraform gets SIGINT (Terraform stops gracefully and writes
its state, which the work dir keeps for the next run), is killed if it has not exited within `GRACE_S`, and
the orphaned host exits. The bridge's terraform runs also wait for a state lock (`-lock-timeout`) rather
than fail at once, which covers the moments in which an orphan is still stopping.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from npa_pulumi.runtime.processes import parent_pid, run_is_gone

log = logging.getLogger(__name__)

GRACE_S = 60.0
POLL_S = 0.5

_running: set[subprocess.Popen[Any]] = set()
_lock = threading.Lock()
_watching = False


PLUGIN_HOSTS = ("pulumi.dynamic", "pulumi.policy")


def in_plugin_host() -> bool:
    """Whether this process is one of the engine's Python plugin hosts (`python -m pulumi.dynamic|policy`)."""
    # `python -m pulumi.policy` runs the pack's own __main__ in place of its own, so look at argv[0] too.
    main = sys.modules.get("__main__")
    names = [getattr(getattr(main, "__spec__", None), "name", "") or ""]
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "__main__.py" and argv0.parent.parent.name == "pulumi":
        names.append(f"pulumi.{argv0.parent.name}")
    return any(n == host or n.startswith(f"{host}.") for n in names for host in PLUGIN_HOSTS)


def watch_run(plugin_host: bool | None = None) -> None:
    """Start (once per process) the watchdog that stops terraform when the run that started us is gone.
    A no-op outside the engine's plugin hosts (the CLI itself may well outlive its parent shell);
    `plugin_host=True` says so for code that only ever runs in one (a policy pack's __main__, which
    `pulumi.policy` runs with runpy, hiding its own identity)."""
    global _watching
    if not (in_plugin_host() if plugin_host is None else plugin_host):
        return
    with _lock:
        if _watching:
            return
        _watching = True
    parent = os.getppid()
    grandparent = parent_pid(parent)
    thread = threading.Thread(target=_watch, args=(parent, grandparent), name="npa-orphan-watch", daemon=True)
    thread.start()


def supervised_elsewhere() -> None:
    """Make `watch_run` a no-op in this process: it is watched by other means (the command's shared host,
    runtime/provider_host.py, which stops with the orchestrator rather than with an engine)."""
    global _watching
    with _lock:
        _watching = True


def _watch(parent: int, grandparent: int | None) -> None:
    while not run_is_gone(parent, grandparent):
        time.sleep(POLL_S)
    log.warning("the run that started this provider host is gone: stopping terraform")
    stop_all(GRACE_S)
    os._exit(70)  # nothing will ever talk to this host again


def stop_all(grace_s: float) -> None:
    with _lock:
        running = list(_running)
        guards = [_guards.pop(proc) for proc in running if proc in _guards]
    for guard in guards:  # this process stops them itself: no second SIGINT from a guard if it dies meanwhile
        guard.disarm()
    for proc in running:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + grace_s
    for proc in running:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()


WATCH = 'read line; [ "$line" = done ] || kill -INT "$1" 2>/dev/null'


class _Guard:
    """One SIGINT for a bound child when the process that started it dies, however it dies: a shell that
    blocks reading a pipe whose only writer is this process. The kernel closes the pipe when this process
    ends; the shell then reads end-of-file instead of `done` and interrupts the child, once. (The kernel's
    parent-death signal, tried first, is sent again at every reparenting while a multi-threaded parent's
    threads die one by one, and a second SIGINT makes terraform quit without writing its state.)"""

    def __init__(self, pid: int) -> None:
        read_end, self._write_end = os.pipe()  # not inheritable: no other child holds the writer
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                ["/bin/sh", "-c", WATCH, "npa-child-guard", str(pid)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                process_group=0,  # a Ctrl-C to the CLI's group does not end the guard
            )
        except OSError:
            os.close(self._write_end)
            raise
        finally:
            os.close(read_end)

    def disarm(self) -> None:
        """The child ended, or this process stops it itself: the guard exits without a signal."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            os.write(self._write_end, b"done\n")
        os.close(self._write_end)
        proc.wait()


_bound = False
_guards: dict[subprocess.Popen[Any], _Guard] = {}


def bind_children_to_this_process() -> bool:
    """From now on, `run` starts its children the way a process that serves providers in-process must: the
    orchestrator calls this when it serves the command's providers itself. Each child runs in a process
    group of its own (a Ctrl-C to the CLI's group reaches the engines, which cancel; a second SIGINT
    straight from the terminal would make terraform quit without writing its state), writes to files
    rather than pipes, and has a `_Guard`. False where that cannot be done (no /bin/sh): the orchestrator
    then serves them from a host process of their own, which watches its run and stops terraform itself."""
    global _bound
    with _lock:
        if not _bound:
            _bound = os.name == "posix" and os.access("/bin/sh", os.X_OK)
        return _bound


def run(cmd: list[str], cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(cmd, capture_output=True, text=True)`, registered so the watchdog can stop it."""
    if _bound:
        return _run_bound(cmd, cwd, env)
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with _lock:
        _running.add(proc)
    try:
        stdout, stderr = proc.communicate()
    finally:
        with _lock:
            _running.discard(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _run_bound(cmd: list[str], cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`run` in a process that serves providers in-process. The child writes to anonymous files, not pipes:
    if this process dies, a pipe's reader is gone and terraform's next write (its "Interrupt received"
    message, say) would end it by SIGPIPE before it wrote its state; a file outlives its reader."""
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=out, stderr=err, process_group=0
        )
        guard = _Guard(proc.pid)
        with _lock:
            _running.add(proc)
            _guards[proc] = guard
        try:
            proc.wait()
        finally:
            with _lock:
                _running.discard(proc)
                _guards.pop(proc, None)
            guard.disarm()
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", errors="replace")
        stderr = err.read().decode("utf-8", errors="replace")
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def spawn_bound(cmd: list[str], log: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start `cmd` as a child that the kernel kills when this process dies (PR_SET_PDEATHSIG, set before
    exec; runtime/plugin_guard.py), its output appended to `log`, stdin closed: a child that can never
    outlive the long-lived process that supervises it, however that process ends."""
    from npa_pulumi.runtime.plugin_guard import die_with

    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            close_fds=True,
            env=dict(env),
            preexec_fn=die_with(os.getpid()),
        )
