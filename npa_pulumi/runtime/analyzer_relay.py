"""The policy-pack host the engine starts for each run, when the command's shared host serves the pack:
a relay that only asks the shared host (runtime/analyzer_service.py, named by `NPA_ANALYZER_SOCKET`) for an
analyzer of the pack, prints its port for the engine, and lives as long as the engine keeps it (its
connection is what keeps that analyzer running).

The engine starts one per stack operation that evaluates policies, so its start is most of its cost, and it
is kept to the standard library and this package's process facts: the engine's Python wrapper
(`plugin_python_wrapper`) runs it as `python -I -S`, without the site module and the installed packages'
start-up hooks: about 28 ms of CPU per start, where a relay in `python -m npa_pulumi.runtime.plugin_host`
cost about 60.
When the shared host cannot serve the pack, the relay becomes the full plugin host
(`npa_pulumi.runtime.plugin_host`), which runs the pack itself.
"""

from __future__ import annotations

import json
import os
import socket
import sys

from npa_pulumi.runtime.processes import parent_pid, run_is_gone

SOCKET_ENV = "NPA_ANALYZER_SOCKET"  # where the shared host serves analyzers (a Unix socket)
POLL_S = 0.5


def relay_analyzer(socket_path: str, args: list[str]) -> int | None:
    """Ask the shared host for an analyzer of the pack in `args` (`ENGINE PROGRAM ...`), print its port,
    and wait until the engine or the shared host is done with it: the exit status. None: the shared host
    does not serve this pack (or is gone), and the pack must run in this process's place."""
    positional = [a for a in args if not a.startswith("-")]
    if len(positional) < 2:
        return None
    parent = os.getppid()  # the engine's plugin launcher script; the engine is its parent
    grandparent = parent_pid(parent)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(socket_path)
        conn.sendall(json.dumps({"pack": os.path.abspath(positional[1])}).encode() + b"\n")
        reader = conn.makefile("rb")
        answer = json.loads(reader.readline() or b"{}")
    except (OSError, ValueError):
        conn.close()
        return None
    port = answer.get("port")
    if not isinstance(port, int):
        conn.close()
        return None
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    conn.settimeout(POLL_S)
    while True:  # the engine kills this process when its run is over
        try:
            if not conn.recv(4096):
                return 0  # the shared host stopped
        except TimeoutError:
            if run_is_gone(parent, grandparent):
                return 70  # the run is gone
        except OSError:
            return 0


def main(argv: list[str]) -> None:
    """`argv`: `[_, -u, -m, pulumi.policy, ENGINE, PROGRAM, ...]`, as the engine gives its Python command."""
    socket_path = os.environ.get(SOCKET_ENV)
    relayed = relay_analyzer(socket_path, argv[4:]) if socket_path else None
    if relayed is not None:
        os._exit(relayed)
    # Not served here: the full host (with the site packages this start left out) runs the pack.
    os.execv(sys.executable, [sys.executable, "-u", "-m", "npa_pulumi.runtime.plugin_host", *argv[1:]])
