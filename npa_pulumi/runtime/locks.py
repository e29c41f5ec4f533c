"""The one file-lock helper: an exclusive `flock` on a file, which the kernel releases when its holder
exits, however it exits (SIGKILL, OOM, a crash), so a lock can never be left stale by a dead process and
no pid bookkeeping is needed to tell whether its holder lives.

    with FileLock(path):                  # wait for it
        ...
    lock = FileLock(path)
    if lock.acquire(blocking=False): ...  # or give up at once
    held_elsewhere(path)                  # is anyone holding it right now?

A lock belongs to the open file, not to the process or thread: two `FileLock`s of one path exclude each
other even within one process, and a child process does not inherit it (Python opens files
non-inheritable). Locks are advisory, and on network filesystems they are only as good as the
filesystem's lock support, so a lock that other hosts take too should say which host took it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

_POLL_S = 0.05


class FileLock:
    def __init__(self, path: Path, *, timeout_s: float | None = None) -> None:
        """`timeout_s` bounds how long `with` waits (TimeoutError after it); None waits for as long as it
        takes."""
        self.path = path
        self.timeout_s = timeout_s
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, *, blocking: bool = True, timeout_s: float | None = None) -> bool:
        """Take the lock, creating the file (and its directory) if needed. Returns False when it is held
        elsewhere and `blocking` is False, or `timeout_s` passed first."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already locked by this FileLock")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while True:
                if blocking and deadline is None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    break
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if not blocking or (deadline is not None and time.monotonic() >= deadline):
                        os.close(fd)
                        return False
                    time.sleep(_POLL_S)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def write(self, text: str) -> None:
        """Replace the locked file's content (for a lock file that also says who holds it)."""
        if self._fd is None:
            raise RuntimeError(f"{self.path} is not locked")
        data = text.encode("utf-8")
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the file releases its lock

    def __enter__(self) -> FileLock:
        if not self.acquire(timeout_s=self.timeout_s):
            raise TimeoutError(f"{self.path} stayed locked for {self.timeout_s}s")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


def held_elsewhere(path: Path) -> bool:
    """Whether some open file (another process's, or another `FileLock` here) holds `path`'s lock now.
    False when the file does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
