"""Writing files that parallel stacks and processes share, so that no reader ever sees one half-written."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_atomically(path: Path, text: str, mode: int | None = None) -> None:
    """Write `text` to `path` so that no reader ever sees it half-written: a temp file of this process and
    thread beside it, then a rename. Raises OSError like `write_text`; the temp file never stays behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        # Created with its mode from the start: a private file (a kubeconfig's key) is never readable
        # by others, not even between the write and a chmod.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if mode is None else mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        if mode is not None:
            tmp.chmod(mode)  # the umask may have narrowed it
        else:
            tmp.chmod(0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def create_private_file(path: Path, text: str) -> None:
    """Create `path` with mode 0600 holding `text`; FileExistsError if it exists (the first writer wins)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
