"""Reading what `nvidia-smi` prints, as the MIG hardware probe runs it (npa_pulumi/kube/gpu_health/).

Two outputs:

* `nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]`: one row per GPU, the fields in the
  order asked, comma-separated. With a header the first row names the fields (with the unit in brackets
  when units are on: `memory.total [MiB]`). A field the GPU does not support reads `[N/A]` (a GeForce or
  RTX workstation card's `mig.mode.current`), `[Not Supported]` or `N/A`; that is a value, not a parse
  error.
* `nvidia-smi -L`: a line per GPU, `GPU <i>: <name> (UUID: GPU-…)`, each MIG device under its GPU,
  indented, `MIG <profile> Device <j>: (UUID: MIG-…)`. Drivers before R470 named a MIG device
  `MIG-GPU-<gpu uuid>/<gi>/<ci>`; both forms are read.

Lines that are neither (a `kubectl exec` notice such as `Defaulted container "…" out of: …`, a blank
line, an error nvidia-smi printed) are kept as `notices`, never read as a GPU or a row. A row is taken only
when each field it holds for a field whose shape is known (`index`, `uuid`, the MIG modes) has that shape,
so a notice that happens to hold commas is never a GPU. The tests hold outputs people published (NVIDIA's
and others' issues and docs, tests/fixtures/tool_outputs/nvidia-smi/).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

NOT_AVAILABLE = ("[N/A]", "N/A", "[Not Supported]", "[Unknown Error]")
_FIELD_SHAPES: dict[str, re.Pattern[str]] = {
    "index": re.compile(r"\d+"),
    "uuid": re.compile(r"GPU-[0-9a-fA-F-]+"),
    "mig.mode.current": re.compile(r"Enabled|Disabled|\[N/A\]|N/A|\[Not Supported\]"),
    "mig.mode.pending": re.compile(r"Enabled|Disabled|\[N/A\]|N/A|\[Not Supported\]"),
    "driver_version": re.compile(r"\d+(\.\d+)+"),
}
_GPU_LINE = re.compile(r"^GPU (\d+): (.*?) \(UUID: (GPU-[0-9a-fA-F-]+)\)\s*$")
# Leading spaces: nvidia-smi indents a MIG device by two; documentation that reflowed the output lost them.
_MIG_LINE = re.compile(r"^\s*MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)\s*$")


@dataclass
class QueryOutput:
    rows: list[dict[str, str]] = field(default_factory=list)  # one per GPU: field -> value as printed
    notices: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class MigDevice:
    profile: str  # e.g. 1g.24gb
    index: int  # its `Device <j>` number
    uuid: str


@dataclass
class ListedGpu:
    index: int
    name: str
    uuid: str
    mig: list[MigDevice] = field(default_factory=list)


@dataclass
class Listing:
    gpus: dict[int, ListedGpu] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)


def _header_name(cell: str) -> str:
    return cell.split(" [", 1)[0].strip()


def parse_query(output: str, fields: Sequence[str]) -> QueryOutput:
    """The rows of a `--query-gpu=<fields> --format=csv…` output (a header row, if any, is skipped)."""
    result = QueryOutput()
    for line in output.splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) == len(fields) and [_header_name(c) for c in cells] == list(fields):
            continue  # the header
        shaped = len(cells) == len(fields) and all(
            _FIELD_SHAPES[name].fullmatch(value)
            for name, value in zip(fields, cells, strict=True)
            if name in _FIELD_SHAPES
        )
        if shaped:
            result.rows.append(dict(zip(fields, cells, strict=True)))
        else:
            result.notices.append(line)
    return result


def parse_listing(output: str) -> Listing:
    """The GPUs of an `nvidia-smi -L` output, each with its MIG devices."""
    result = Listing()
    current: ListedGpu | None = None
    for line in output.splitlines():
        if gpu := _GPU_LINE.match(line):
            current = ListedGpu(int(gpu.group(1)), gpu.group(2), gpu.group(3))
            result.gpus[current.index] = current
        elif (device := _MIG_LINE.match(line)) and current is not None:
            current.mig.append(MigDevice(device.group(1), int(device.group(2)), device.group(3)))
        elif line.strip():
            result.notices.append(line)
    return result
