"""Run the npa-pulumi CLI in this process and record this process's own peak RSS when it exits.

    python -m benchmarks.rss_probe OUTFILE -- <npa-pulumi arguments>

`wait4` reports the largest RSS anywhere in a process tree, which is usually the Pulumi engine (Go); the
orchestrator's target is about the Python process that runs the fleet, so it measures itself
(`ru_maxrss` of RUSAGE_SELF, in KiB, written to OUTFILE at exit).
"""

from __future__ import annotations

import atexit
import resource
import runpy
import sys
from pathlib import Path


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        sys.exit("usage: python -m benchmarks.rss_probe OUTFILE -- ARGS...")
    out = Path(sys.argv[1])

    def record() -> None:
        out.write_text(f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\n")

    atexit.register(record)
    sys.argv = ["npa-pulumi", *sys.argv[3:]]
    runpy.run_module("npa_pulumi.cli.main", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
