"""The entry point of the engine's Python plugin hosts: `python -m npa_pulumi.runtime.plugin_host -u -m
pulumi.dynamic|pulumi.policy ARGS...`.

The engine starts its Python plugin hosts as `$PULUMI_PYTHON_CMD -u -m pulumi.dynamic ARGS` (dynamic
providers) and `... -m pulumi.policy ARGS` (policy packs). `engine_env` points `PULUMI_PYTHON_CMD` at a
two-line wrapper (`plugin_python_wrapper`) that runs this module instead, so the orphan watchdog
(`supervision.watch_run`) starts before the host serves anything. Started from the provider's code, it only
ran once the first resource request arrived: a run killed between the host's start and that request (the
chaos campaign hit it at 2.3 s) left the host waiting for an engine that no longer existed, forever.
Anything else given to the wrapper goes to the real interpreter unchanged.

A policy pack the command's shared host serves (runtime/analyzer_service.py, named by `NPA_ANALYZER_SOCKET`)
is not run here at all: this process only relays the port of an analyzer the shared host starts for it,
and lives as long as the engine keeps it (its connection is what keeps that analyzer running).
"""

from __future__ import annotations

import os
import runpy
import sys

from npa_pulumi.runtime.processes import parent_pid
from npa_pulumi.runtime.supervision import PLUGIN_HOSTS, run_is_gone, watch_run

SOCKET_ENV = "NPA_ANALYZER_SOCKET"  # = analyzer_service.SOCKET_ENV (not imported: this start must stay light)
POLL_S = 0.5


def plugin_module(args: list[str]) -> tuple[str, list[str]] | None:
    """(module, its arguments) when `args` are `[-u ...] -m <a plugin host module> ARGS`, else None."""
    position = 0
    while position < len(args) and args[position] == "-u":
        position += 1
    if len(args) - position >= 2 and args[position] == "-m" and args[position + 1] in PLUGIN_HOSTS:
        return args[position + 1], args[position + 2 :]
    return None


def main(argv: list[str]) -> None:
    found = plugin_module(argv[1:])
    if found is None:
        os.execv(sys.executable, [sys.executable, *argv[1:]])
    module, rest = found
    if module == "pulumi.policy" and os.environ.get(SOCKET_ENV):
        relayed = relay_analyzer(os.environ[SOCKET_ENV], rest)
        if relayed is not None:
            os._exit(relayed)
    watch_run(plugin_host=True)
    sys.argv = [module, *rest]  # run_module puts the module's file in argv[0], as `python -m` does
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def relay_analyzer(socket_path: str, args: list[str]) -> int | None:
    """Ask the shared host for an analyzer of the pack in `args` (`ENGINE PROGRAM ...`), print its port,
    and wait until the engine or the shared host is done with it. None: run the pack here after all."""
    import json
    import socket

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


if __name__ == "__main__":
    main(sys.argv)
