"""The per-user npa-pulumi directory (state, passphrase, work dirs, logs, caches, the local cloud), and how
files shared by parallel stacks and processes are written there."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def npa_home() -> Path:
    """`$NPA_PULUMI_HOME`, else `~/.npa-pulumi`."""
    return Path(os.environ.get("NPA_PULUMI_HOME") or Path.home() / ".npa-pulumi")


def write_atomically(path: Path, text: str, mode: int | None = None) -> None:
    """Write `text` to `path` so that no reader ever sees it half-written: a temp file of this process and
    thread beside it, then a rename. Raises OSError like `write_text`; the temp file never stays behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        if mode is not None:
            tmp.chmod(mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
