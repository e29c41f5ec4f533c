"""Reading what nccl-tests' `all_reduce_perf` prints (and the fabric check's inter-node program, which
prints the same table).

The output is a `#`-commented header (the run's parameters, one `#  Rank ...` line per GPU), a column
header, one row per message size, then `# Out of bounds values : N OK|FAILED` and
`# Avg bus bandwidth    : <GB/s>`:

    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw ...
       536870912     134217728     float     sum      -1   2245.1  239.13  418.48      0   2240.7  239.60 ...

Each row ends with the out-of-place then the in-place group (time in us, algbw and busbw in GB/s,
#wrong), so the columns are read from the end of the row: releases differ in the columns before them
(`redop`, `root`), and `#wrong` reads `N/A` when validation is off (`-c 0`). busbw = algbw x 2(n-1)/n for
an all-reduce over n ranks; the average is over both groups of every row.

What else lands in the same stream is told apart from a failure (the shapes below are from outputs people
published with nccl-tests, NCCL and Open MPI issues):

* a launcher's tags: `mpirun --tag-output` prefixes every write with `[0]` (or `[1,0]<stdout>:`), and as
  nccl-tests writes each group of a row separately, the tag also appears inside a row (`-1[0]  1626.5`);
  they are removed before a line is read;
* notices: `NCCL INFO` / `NCCL WARN` lines (`Failed to open libibverbs.so[.1]`, `Could not find a path for
  pattern 4`), Open MPI's boxed warnings (`WARNING: There was an error initializing an OpenFabrics
  device.`, `No preset parameters were found`), X11's `Authorization required` from hwloc: kept in
  `notices`, never a failure by themselves (a run that failed also lists NCCL's WARN lines among its
  errors: they say why);
* failures: nccl-tests' own `Test NCCL failure` / `Test CUDA failure` / `NCCL failure`, an NCCL `WARN`
  that says the run aborted (`unhandled system error`, `unhandled cuda error`), `# Out of bounds values :
  N FAILED`, wrong values, and no rows or no average line (the benchmark did not finish).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.]+)")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\w+)?")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\b.*\bon\s+(\S+)\s+device\s+(\d+)")
_FAILURE = re.compile(
    r"(Test (?:NCCL|CUDA) failure|NCCL failure|CUDA failure|unhandled (?:system|cuda|internal) error"
    r"|NCCL error|Segmentation fault|Aborted)"
)
_NOTICE = re.compile(r"(NCCL (?:INFO|WARN)|WARNING|Warning|NOTE:|Authorization required)")
# `mpirun --tag-output`'s prefix ([rank] or [job,rank]<stdout>:), at a line's start or inside a row.
_TAG = re.compile(r"\[\d+(?:,\d+)*\](?:<std(?:out|err)>:)?")


@dataclass(frozen=True)
class SizeRow:
    size_bytes: int
    count: int
    out_time_us: float
    out_algbw_gbps: float
    out_busbw_gbps: float
    out_wrong: int | None
    in_time_us: float
    in_algbw_gbps: float
    in_busbw_gbps: float
    in_wrong: int | None


@dataclass
class AllReduceResult:
    rows: list[SizeRow] = field(default_factory=list)
    avg_busbw_gbps: float | None = None
    out_of_bounds: int | None = None
    ranks: int = 0
    hosts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # NCCL's, the launcher's, MPI's: never a failure

    @property
    def largest(self) -> SizeRow | None:
        return max(self.rows, key=lambda r: r.size_bytes) if self.rows else None

    @property
    def largest_busbw_gbps(self) -> float | None:
        """The out-of-place bus bandwidth at the largest size (the inter-node figure)."""
        row = self.largest
        return None if row is None else row.out_busbw_gbps

    @property
    def wrong(self) -> int:
        return sum((r.out_wrong or 0) + (r.in_wrong or 0) for r in self.rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "avg_busbw_gbps": self.avg_busbw_gbps,
            "largest_size_bytes": None if self.largest is None else self.largest.size_bytes,
            "largest_busbw_gbps": self.largest_busbw_gbps,
            "ranks": self.ranks,
            "rows": [asdict(r) for r in self.rows],
            "out_of_bounds": self.out_of_bounds,
            "wrong": self.wrong,
            "errors": self.errors,
            "notices": self.notices[:20],
        }


def _number(text: str) -> float:
    return float(text)


def _wrong(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _row(tokens: list[str]) -> SizeRow | None:
    if len(tokens) < 10 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    try:
        return SizeRow(
            size_bytes=int(tokens[0]),
            count=int(tokens[1]),
            out_time_us=_number(tokens[-8]),
            out_algbw_gbps=_number(tokens[-7]),
            out_busbw_gbps=_number(tokens[-6]),
            out_wrong=_wrong(tokens[-5]),
            in_time_us=_number(tokens[-4]),
            in_algbw_gbps=_number(tokens[-3]),
            in_busbw_gbps=_number(tokens[-2]),
            in_wrong=_wrong(tokens[-1]),
        )
    except ValueError:
        return None


def parse_all_reduce(output: str) -> AllReduceResult:
    """The per-size rows, the average bus bandwidth and what went wrong, from `all_reduce_perf`'s output.
    A run without rows or without its `# Avg bus bandwidth` line is an error (it did not finish)."""
    result = AllReduceResult()
    hosts: set[str] = set()
    for line in output.splitlines():
        stripped = _TAG.sub(" ", line).strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            if found := _AVG.match(stripped):
                result.avg_busbw_gbps = float(found.group(1))
            elif found := _OUT_OF_BOUNDS.match(stripped):
                result.out_of_bounds = int(found.group(1))
            elif found := _RANK.match(stripped):
                result.ranks += 1
                hosts.add(found.group(2))
            continue
        row = _row(stripped.split())
        if row is not None:
            result.rows.append(row)
        elif _FAILURE.search(stripped):
            result.errors.append(stripped[:200])
        elif _NOTICE.search(stripped):
            result.notices.append(stripped[:200])
    result.hosts = sorted(hosts)
    if not result.rows:
        result.errors.append("no result rows (the benchmark did not run)")
    if result.avg_busbw_gbps is None:
        result.errors.append("no '# Avg bus bandwidth' line (the benchmark did not finish)")
    if result.out_of_bounds:
        result.errors.append(f"{result.out_of_bounds} out-of-bounds value(s)")
    if result.wrong:
        result.errors.append(f"{result.wrong} wrong value(s)")
    if result.errors:  # a failed run: what NCCL warned of is its likely cause, said beside the failure
        result.errors += [n for n in result.notices if "NCCL WARN" in n][:5]
    return result


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """nccl-tests' size syntax: `512M`, `8G`, `1024` (binary units)."""
    found = re.fullmatch(r"(\d+)([KMG]?)", text.strip().upper())
    if not found:
        raise ValueError(f"not a message size: {text!r} (e.g. 512M or 8G)")
    return int(found.group(1)) * _UNITS[found.group(2)]
