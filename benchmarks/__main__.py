"""`python -m benchmarks [--quick] [--only a,b] [--repeats N]` (make bench / make bench-quick).

Prints a markdown table and writes `benchmarks/out/report.json`: machine facts, every scenario's repeats,
medians, ratios, whether each target was met, and for a missed one what remains and why.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import OUT, REPO, load_average, machine_facts
from benchmarks.report import markdown_table, notes_for
from benchmarks.scenarios import FULL_ONLY, SCENARIOS, Budget, run


def compile_bytecode() -> None:
    """Measure the product as installed: pip compiles a wheel's modules at install time, while an editable
    checkout compiles them on first import, and not at all where PYTHONDONTWRITEBYTECODE is set (then
    every CLI process and plugin host would recompile npa_pulumi, ~0.1 s each, on every run)."""
    sources = [str(REPO / name) for name in ("npa_pulumi", "components", "policies")]
    command = [sys.executable, "-m", "compileall", "-q", *sources]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the few-minutes budget (make bench-quick)")
    parser.add_argument("--only", default="", help=f"comma-separated scenarios of: {', '.join(SCENARIOS)}")
    parser.add_argument("--repeats", type=int, default=0, help="repeats per measurement (default by budget)")
    parser.add_argument("--out", type=Path, default=OUT, help="report directory (default benchmarks/out)")
    parser.add_argument(
        "--scale-clusters",
        type=int,
        default=0,
        help="cluster stacks of the scale scenario (default by budget: 200 full, 40 quick)",
    )
    parser.add_argument(
        "--fleet-s3-clusters",
        type=int,
        default=0,
        help="cluster stacks of the fleet_s3 scenario (default 10,000; fewer to try it: the report says so)",
    )
    args = parser.parse_args(argv)

    budget = Budget.quick() if args.quick else Budget.full()
    if args.repeats:
        if args.repeats < 2:
            parser.error("--repeats must be at least 2: medians over repeats, never a single run")
        budget = dataclasses.replace(budget, repeats=args.repeats)
    if args.scale_clusters:
        if args.scale_clusters < budget.scale_shards:
            parser.error(f"--scale-clusters must be at least the {budget.scale_shards} shards")
        budget = dataclasses.replace(budget, scale_clusters=args.scale_clusters)
    if args.fleet_s3_clusters:
        budget = dataclasses.replace(budget, fleet_s3_clusters=args.fleet_s3_clusters)
    chosen = [n.strip() for n in args.only.split(",") if n.strip()]
    names = chosen or [n for n in SCENARIOS if not (args.quick and n in FULL_ONLY)]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")

    args.out.mkdir(parents=True, exist_ok=True)
    compile_bytecode()
    work = args.out / "work"
    shutil.rmtree(work, ignore_errors=True)
    report: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_facts(),
        "budget": dataclasses.asdict(budget),
        "scenarios": {},
    }
    started = time.monotonic()
    for name in names:
        sys.stderr.write(f"[bench] {name} ...\n")
        result = run(name, work, budget)
        result["load_average_after"] = load_average()
        result["notes"] = notes_for(name, result)
        report["scenarios"][name] = result
        sys.stderr.write(
            f"[bench] {name}: {'met' if result.get('met') else 'MISSED'} ({result['scenario_seconds']}s)\n"
        )
        (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    report["total_seconds"] = round(time.monotonic() - started, 1)
    report["machine"]["load_average_at_end"] = load_average()
    table = markdown_table(report)
    report["markdown"] = table
    (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "report.md").write_text(table + "\n")
    shutil.rmtree(work, ignore_errors=True)
    print(table)
    print(f"\nfull report: {args.out / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
