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
is not run here at all: the wrapper starts the light relay (runtime/analyzer_relay.py) in this module's
place, which comes here only when the shared host does not serve the pack.
"""

from __future__ import annotations

import os
import runpy
import sys

from npa_pulumi.runtime.supervision import PLUGIN_HOSTS, watch_run


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
    watch_run(plugin_host=True)
    sys.argv = [module, *rest]  # run_module puts the module's file in argv[0], as `python -m` does
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv)
