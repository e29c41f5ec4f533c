"""Starting a detached daemon (the local cloud's per-cluster agents and its S3 server): a session of its
own, so no signal to the starting command's process group or terminal reaches it; stdin closed; output
appended to its log; and an environment without the caller's secrets (a daemon outlives the command, and
its environment is readable in /proc for as long as it runs). Each daemon holds a lock for its life and
stops by itself when what it serves is gone; its owner's lifecycle module decides when to start one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SECRET_ENV_PREFIXES = (
    "TF_VAR_",
    "NEBIUS_",
    "NPA_NEBIUS_",
    "PULUMI_CONFIG_PASSPHRASE",
    "AWS_",
    "ACTIONS_ID_TOKEN_REQUEST_",  # a CI job's OIDC request token (keyless CI)
)


def daemon_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(SECRET_ENV_PREFIXES)}


def spawn_python_daemon(module: str, args: list[str], log: Path) -> None:
    """Start `python -m module *args` detached, its output appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            close_fds=True,
            start_new_session=True,
            env=daemon_env(),
        )
