"""A guard in front of a plugin binary the engine starts (the Go `pulumi-resource-kubernetes`):
`python -m npa_pulumi.runtime.plugin_guard REAL_BINARY ARGS...`.

The engine starts plugins in process groups of their own, so a run killed the way CI cancels a job (SIGKILL
to the CLI's process group) leaves them serving nobody, forever. The Python hosts watch their run
themselves (`supervision.watch_run`); a Go binary cannot, so this guard does it for it: it starts the real
plugin as its child, sharing its stdin/stdout/stderr (the engine reads the plugin's port from stdout as
usual), and

* stops the child when the engine that started the guard is gone (the guard is reparented);
* forwards SIGTERM and SIGINT to it (their default actions restored in the child, even when the guard was
  started with them ignored);
* has the kernel kill the child if the guard itself is killed (PR_SET_PDEATHSIG, set in the child just
  before exec by the guard's only thread, which lives as long as the guard);
* gives the child a temporary directory of its own (TMPDIR, mode 0700) and removes it when the child
  ends: the Kubernetes provider writes the cluster's kubeconfig, credentials included, to a fresh
  `$TMPDIR/kubeconfig*` file on every configure and never deletes it (pkg/provider/util.go,
  writeKubeconfigToFile), so without this every stack operation left one in /tmp.

Standard library only: it starts once per plugin, on the path of every stack operation that uses it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

POLL_S = 0.5
GRACE_S = 5.0
_PR_SET_PDEATHSIG = 1


def die_with(guard: int) -> Callable[[], None]:
    def before_exec() -> None:
        # A command started in the background of a non-interactive shell (`nohup npa-pulumi up &`, a CI
        # step run that way) inherits SIGINT ignored, and an ignored signal stays ignored across exec: the
        # engine's SIGINT, which the guard forwards, would never stop the child. It gets the defaults.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The guard may have died between the fork and the prctl: the kernel would then never signal us.
        if os.getppid() != guard:
            os.kill(os.getpid(), signal.SIGKILL)

    return before_exec


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: python -m npa_pulumi.runtime.plugin_guard REAL_BINARY [ARGS...]\n")
        return 2
    engine = os.getppid()
    private_tmp = tempfile.mkdtemp(prefix="npa-plugin-")
    try:
        return _run(argv[1:], engine, {**os.environ, "TMPDIR": private_tmp})
    finally:
        shutil.rmtree(private_tmp, ignore_errors=True)


def _run(command: list[str], engine: int, env: dict[str, str]) -> int:
    child = subprocess.Popen(command, env=env, preexec_fn=die_with(os.getpid()))
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda s, _f: child.send_signal(s))
    while True:
        code = child.poll()
        if code is not None:
            return code
        if os.getppid() != engine:  # the run is gone: nothing will ever talk to this plugin again
            child.terminate()
            try:
                child.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
            return 70
        time.sleep(POLL_S)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
