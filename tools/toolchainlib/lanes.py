"""The Go builds, run two at a time where the memory allows. Each is independent of the others (its own
module, cache directory, lock and links); Go's module cache takes concurrent downloads. Warm, each is a
check of its cache and a link."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .common import ToolchainError

LANES_ENV = "NPA_TOOLCHAIN_LANES"
# Two builds at once peak at about 8 GB (pulumi-kubernetes' ~4.6 GB beside Kubernetes'); below this much
# available memory they run one after the other.
TWO_LANES_MIN_AVAILABLE_GB = 12


def available_memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024 / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def build_lanes() -> int:
    """How many Go builds run at once: `$NPA_TOOLCHAIN_LANES`, else two where the memory allows (one `go
    build` leaves a core idle through module downloads, single-threaded links and its last packages; a
    second build fills it), else one."""
    given = os.environ.get(LANES_ENV, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ToolchainError(f"{LANES_ENV} must be a positive whole number, not {given!r}")
        return int(given)
    memory = available_memory_gb()
    return 2 if (os.cpu_count() or 1) >= 2 and (memory or 0) >= TWO_LANES_MIN_AVAILABLE_GB else 1


def run_go_builds(steps: list[Callable[[], None]], lanes: int) -> None:
    """Run the build steps on `lanes` threads, in the order given (longest first); the first failure is
    raised once every started build has ended (a build is never abandoned half-way: its cache directory
    stays consistent)."""
    if lanes <= 1 or len(steps) <= 1:
        for step in steps:
            step()
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="toolchain") as pool:
        futures = [pool.submit(step) for step in steps]
    first = next((error for error in (f.exception() for f in futures) if error is not None), None)
    if first is not None:
        raise first if isinstance(first, ToolchainError) else ToolchainError(str(first))
