"""A run's timeline, drawn from its OpenTelemetry trace (the OTLP JSON document `--trace-file` writes): one
row per stack with its phases, a staged rollout's waves as bands, each stack's wait, and the longest path.

    timeline = read_timeline(json.loads(path.read_text()))   # TraceError: not a trace of an npa-pulumi run
    html = timeline_section(timeline)                         # an inline SVG and a table, for a report page

It reads the span tree runtime/tracing.py builds: the root `npa-pulumi <command>`; `wave N of M` spans
(`npa.wave`, `npa.wave.state`); one span per stack (`npa.stack`, `npa.kind`, `npa.project`, `npa.status`)
under the root or its wave; the stack's phases (`npa.phase`: preparing, updating, destroying, ...) under it;
steps under a phase (terraform's commands, the gate's resources) and the kubeconfig write (`npa.stack`)
after it. The engine's own spans (another service) are counted, never drawn.

* **Ready** is when a stack could have started: its project stack done (a cluster's; for destroy and cleanup
  the other way round: a project stack waits for its clusters), and the previous wave's barrier passed;
  a stack with neither is ready when the first stack started (the scheduler's start). Its **wait** is the
  time from ready to its first phase: a worker slot (`--concurrency`), a lock.
* The **longest path** is the chain of stacks that ends the run: from the stack that finished last, back
  through whatever held each one up (the dependency that finished last, or — when it waited — the stack
  whose end freed its slot), to a stack nothing held up.

Every text reaches the page through `html_report.text` (the pull-request comment's scrubbing, then HTML
escaping); the trace is read as data, never as markup.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from npa_pulumi.output.html_report import text

SERVICE = "npa-pulumi"
REVERSED_COMMANDS = frozenset({"destroy", "cleanup"})  # project stacks wait for their clusters
FAILED_STATUSES = frozenset({"failed"})


class TraceError(ValueError):
    """The document is not an OTLP JSON trace of an npa-pulumi run (the message says what is missing)."""


@dataclass(frozen=True)
class Span:
    span_id: str
    parent_id: str
    trace_id: str
    name: str
    service: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    error: bool


@dataclass(frozen=True)
class Interval:
    """A phase or a step, in seconds from the run's start."""

    name: str
    start_s: float
    end_s: float
    error: bool = False

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)


@dataclass
class StackRow:
    stack: str
    kind: str
    project: str
    start_s: float
    end_s: float
    status: str
    error: bool
    wave: int | None = None
    phases: list[Interval] = field(default_factory=list)
    steps: list[Interval] = field(default_factory=list)
    engine_spans: int = 0
    ready_s: float = 0.0
    held_by: str | None = None  # the row (its key) that held this one up
    critical: bool = False
    key: str = ""  # the stack span's id: two rows of one stack stay apart

    @property
    def wait_s(self) -> float:
        return max(0.0, self.start_s - self.ready_s)

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)

    @property
    def failed(self) -> bool:
        return self.error or self.status in FAILED_STATUSES


@dataclass(frozen=True)
class Wave:
    index: int
    of: int | None
    start_s: float
    end_s: float
    state: str


@dataclass
class Timeline:
    command: str
    name: str
    fleet: str
    started_at: str
    duration_s: float
    status: str
    stacks: list[StackRow]
    waves: list[Wave]
    run_steps: list[Interval]  # the root's own children: the preflight check, ...
    longest_path: list[str]  # row keys, first to last
    tolerance_s: float = 0.0
    _rows: dict[str, StackRow] = field(default_factory=dict, repr=False)

    def row(self, key: str) -> StackRow:
        if len(self._rows) != len(self.stacks):
            self._rows = {r.key: r for r in self.stacks}
        return self._rows[key]

    @property
    def longest_path_s(self) -> float:
        if not self.longest_path:
            return 0.0
        return self.row(self.longest_path[-1]).end_s - self.row(self.longest_path[0]).start_s


# ------------------------------------------------------------------------------------------ reading


def _value(value: Mapping[str, Any]) -> Any:
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in value:
            return value[kind]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return None
    return None


def _attributes(items: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in items if isinstance(items, list) else []:
        if (
            isinstance(item, dict)
            and isinstance(item.get("key"), str)
            and isinstance(item.get("value"), dict)
        ):
            found[item["key"]] = _value(item["value"])
    return found


def _is_error(status: Any) -> bool:
    code = status.get("code") if isinstance(status, dict) else None
    return code in (2, "2", "STATUS_CODE_ERROR")


def spans_of(document: Any) -> list[Span]:
    """Every span of an OTLP JSON `ExportTraceServiceRequest` (ids as hex strings, as --trace-file writes
    them); TraceError when the document is no such thing."""
    if not isinstance(document, dict) or not isinstance(document.get("resourceSpans"), list):
        raise TraceError("not an OTLP JSON trace (no resourceSpans list): write one with --trace-file FILE")
    found: list[Span] = []
    for resource in document["resourceSpans"]:
        if not isinstance(resource, dict):
            continue
        service = str(_attributes((resource.get("resource") or {}).get("attributes")).get("service.name", ""))
        for scope in resource.get("scopeSpans") or []:
            for raw in (scope.get("spans") or []) if isinstance(scope, dict) else []:
                span = _span(raw, service)
                if span is not None:
                    found.append(span)
    if not found:
        raise TraceError("the trace holds no spans")
    return found


def _span(raw: Any, service: str) -> Span | None:
    if not isinstance(raw, dict):
        return None
    try:
        start, end = int(raw["startTimeUnixNano"]), int(raw["endTimeUnixNano"])
    except (KeyError, TypeError, ValueError):
        return None  # a span without both times cannot be placed
    return Span(
        span_id=str(raw.get("spanId") or ""),
        parent_id=str(raw.get("parentSpanId") or ""),
        trace_id=str(raw.get("traceId") or ""),
        name=str(raw.get("name") or ""),
        service=service,
        start_ns=start,
        end_ns=max(start, end),
        attributes=_attributes(raw.get("attributes")),
        error=_is_error(raw.get("status")),
    )


def _root(spans: list[Span]) -> Span:
    ids = {s.span_id for s in spans}
    roots = [
        s
        for s in spans
        if s.service == SERVICE and s.parent_id not in ids and s.name.startswith(SERVICE + " ")
    ]
    if not roots:
        raise TraceError(
            "no npa-pulumi run in this trace (its root span `npa-pulumi <command>` is missing): "
            "give the file an npa-pulumi command wrote with --trace-file"
        )
    return min(roots, key=lambda s: s.start_ns)


def load_timeline(path: str | Path) -> Timeline:
    """The timeline of the trace file at `path`; TraceError (with what is wrong) when it is none."""
    try:
        raw = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as err:
        raise TraceError(f"cannot be read: {err.strerror or err}") from None
    try:
        document = json.loads(raw)
    except ValueError as err:
        document = _json_lines(raw)  # a collector's file exporter: one export request a line
        if document is None:
            raise TraceError(f"not JSON ({err}): give the OTLP JSON file --trace-file wrote") from None
    return read_timeline(document)


def _json_lines(raw: str) -> dict[str, Any] | None:
    """OTLP JSON lines (the OpenTelemetry Collector's `file` exporter) as one document; None when a line is
    not a JSON object."""
    resource_spans: list[Any] = []
    lines = [line for line in raw.splitlines() if line.strip()]
    for line in lines:
        try:
            document = json.loads(line)
        except ValueError:
            return None
        if not isinstance(document, dict):
            return None
        resource_spans += document.get("resourceSpans") or []
    return {"resourceSpans": resource_spans} if len(lines) > 1 else None


def read_timeline(document: Any) -> Timeline:
    """The timeline of the (first) npa-pulumi run in an OTLP JSON trace document."""
    spans = spans_of(document)
    root = _root(spans)
    spans = [s for s in spans if s.trace_id == root.trace_id]
    ours = [s for s in spans if s.service == SERVICE]
    by_id = {s.span_id: s for s in spans}
    t0 = root.start_ns

    def seconds(ns: int) -> float:
        return (ns - t0) / 1e9

    waves: dict[str, Wave] = {}
    for span in ours:
        if span.parent_id == root.span_id and isinstance(span.attributes.get("npa.wave"), int):
            of = span.attributes.get("npa.waves")
            waves[span.span_id] = Wave(
                index=int(span.attributes["npa.wave"]),
                of=int(of) if isinstance(of, int) else _of_from_name(span.name),
                start_s=seconds(span.start_ns),
                end_s=seconds(span.end_ns),
                state=str(span.attributes.get("npa.wave.state") or ""),
            )
    rows: dict[str, StackRow] = {}
    for span in ours:
        attrs = span.attributes
        if "npa.stack" not in attrs or "npa.phase" in attrs:
            continue
        if span.parent_id != root.span_id and span.parent_id not in waves:
            continue  # a step that names its stack (terraform's commands), not the stack's own span
        if span.name != attrs["npa.stack"]:
            continue  # the kubeconfig write: a step of its stack, after it
        stack = str(attrs["npa.stack"])
        wave = waves.get(span.parent_id)
        rows[span.span_id] = StackRow(
            stack=stack,
            kind=str(attrs.get("npa.kind") or ("cluster" if stack.count(".") >= 2 else "project")),
            project=str(attrs.get("npa.project") or ""),
            start_s=seconds(span.start_ns),
            end_s=seconds(span.end_ns),
            status=str(attrs.get("npa.status") or ("failed" if span.error else "")),
            error=span.error,
            wave=wave.index if wave is not None else None,
            key=span.span_id,
        )
    _fill(rows, spans, by_id, root, seconds)
    run_steps = [
        Interval(s.name, seconds(s.start_ns), seconds(s.end_ns), s.error)
        for s in ours
        if s.parent_id == root.span_id
        and s.span_id not in waves
        and s.span_id not in rows
        and "npa.stack" not in s.attributes
    ]
    command = str(root.attributes.get("npa.command") or root.name.removeprefix(SERVICE + " ").split(" ")[0])
    duration = seconds(root.end_ns)
    timeline = Timeline(
        command=command,
        name=root.name,
        fleet=str(root.attributes.get("npa.fleet") or ""),
        started_at=datetime.fromtimestamp(t0 / 1e9, UTC).isoformat(timespec="seconds"),
        duration_s=duration,
        status=str(root.attributes.get("npa.status") or ("failed" if root.error else "")),
        stacks=_ordered(list(rows.values())),
        waves=sorted(waves.values(), key=lambda w: w.index),
        run_steps=sorted(run_steps, key=lambda i: i.start_s),
        longest_path=[],
        tolerance_s=max(0.05, duration * 0.002),
    )
    _readiness(timeline)
    timeline.longest_path = _longest_path(timeline)
    for key in timeline.longest_path:
        timeline.row(key).critical = True
    return timeline


def _of_from_name(name: str) -> int | None:
    head, _, of = name.rpartition(" of ")
    return int(of) if head and of.isdigit() else None


def _fill(
    rows: dict[str, StackRow], spans: list[Span], by_id: dict[str, Span], root: Span, seconds: Any
) -> None:
    """Each stack's phases (its span's children), steps (anything further down that npa-pulumi recorded,
    and the kubeconfig write after it) and the number of the engine's spans under it."""
    of_stack: dict[str, str | None] = {}

    def owner(span: Span) -> str | None:
        chain: list[str] = []
        current: Span | None = span
        found: str | None = None
        while current is not None:
            if current.span_id in of_stack:
                found = of_stack[current.span_id]
                break
            if current.span_id in rows:
                found = current.span_id
                break
            chain.append(current.span_id)
            current = by_id.get(current.parent_id)
        for span_id in chain:
            of_stack[span_id] = found
        return found

    latest = {row.stack: row for row in sorted(rows.values(), key=lambda r: r.start_s)}
    for span in spans:
        if span.span_id in rows:
            continue
        interval = Interval(span.name, seconds(span.start_ns), seconds(span.end_ns), span.error)
        if span.service == SERVICE and span.parent_id == root.span_id and "npa.stack" in span.attributes:
            row = latest.get(str(span.attributes["npa.stack"]))  # the kubeconfig write, after its stack
            if row is not None:
                row.steps.append(interval)
            continue
        key = owner(span)
        if key is None:
            continue
        row = rows[key]
        if span.service != SERVICE:
            row.engine_spans += 1
        elif span.parent_id == key and "npa.phase" in span.attributes:
            row.phases.append(interval)
        else:
            row.steps.append(interval)
    for row in rows.values():
        row.phases.sort(key=lambda i: i.start_s)
        row.steps.sort(key=lambda i: i.start_s)


def _ordered(rows: list[StackRow]) -> list[StackRow]:
    """Stacks outside any wave first, then each wave's; by start within a group."""
    return sorted(rows, key=lambda r: (r.wave is not None, r.wave or 0, r.start_s, r.stack))


class _ByEnd:
    """Rows sorted by their end, to find the one that ended last by a moment (bisect: a fleet of thousands
    of stacks is read in one pass, not stacks × stacks)."""

    def __init__(self, rows: Iterable[StackRow]) -> None:
        self.rows = sorted(rows, key=lambda r: r.end_s)
        self.ends = [r.end_s for r in self.rows]

    def latest_by(self, limit: float, other_than: StackRow) -> StackRow | None:
        index = bisect.bisect_right(self.ends, limit) - 1
        while index >= 0 and self.rows[index] is other_than:
            index -= 1
        return self.rows[index] if index >= 0 else None


def _readiness(timeline: Timeline) -> None:
    """Each row's `ready_s` and `held_by`: its upstream stacks (a cluster's project stack; for destroy and
    cleanup a project stack's clusters) and the previous wave's stacks, whichever ended last before it
    started; when it still waited, whatever stack ended last before it started (it freed the slot)."""
    if not timeline.stacks:
        return
    reverse = timeline.command in REVERSED_COMMANDS
    upstream_kind, downstream_kind = ("cluster", "project") if reverse else ("project", "cluster")
    upstream: dict[str, list[StackRow]] = {}
    waves: dict[int, list[StackRow]] = {}
    for row in timeline.stacks:
        if row.kind == upstream_kind and row.project:
            upstream.setdefault(row.project, []).append(row)
        if row.wave is not None:
            waves.setdefault(row.wave, []).append(row)
    upstream_by_end = {project: _ByEnd(rows) for project, rows in upstream.items()}
    wave_by_end = {wave: _ByEnd(rows) for wave, rows in waves.items()}
    everything = _ByEnd(timeline.stacks)
    scheduler_start = min(r.start_s for r in timeline.stacks)
    barrier = {w.index + 1: w.end_s for w in timeline.waves}  # a wave starts after the previous one ends
    tolerance = timeline.tolerance_s
    for row in timeline.stacks:
        limit = row.start_s + tolerance
        deps = []
        if row.kind == downstream_kind and row.project in upstream_by_end:
            deps.append(upstream_by_end[row.project].latest_by(limit, row))
        if row.wave is not None and row.wave - 1 in wave_by_end:
            deps.append(wave_by_end[row.wave - 1].latest_by(limit, row))
        found = [d for d in deps if d is not None]
        ready = max([scheduler_start, *(d.end_s for d in found)])
        if row.wave in barrier:
            ready = max(ready, barrier[row.wave])
        row.ready_s = min(ready, row.start_s)
        held = max(found, key=lambda d: d.end_s, default=None)
        if row.wait_s > tolerance:
            # It could have run and did not: whatever ended last before it started freed its slot.
            freed = everything.latest_by(limit, row)
            if freed is not None and freed.end_s >= row.ready_s - tolerance:
                held = freed if held is None or freed.end_s > held.end_s else held
        row.held_by = held.key if held is not None else None


def _longest_path(timeline: Timeline) -> list[str]:
    if not timeline.stacks:
        return []
    last = max(timeline.stacks, key=lambda r: (r.end_s, r.start_s))
    path = [last.key]
    current = last
    while current.held_by is not None and current.held_by not in path:
        path.append(current.held_by)
        current = timeline.row(current.held_by)
    return list(reversed(path))


# ------------------------------------------------------------------------------------------ drawing

LABEL_W, CHART_W, TAIL_W = 250, 760, 110
ROW_H, BAR_H, STEP_H, AXIS_H, WAVE_H = 24, 12, 4, 28, 20
CRITICAL = "#e8590c"
BOLD = ' font-weight="600"'
WAIT = "#8c8c8c"
PHASE_COLOURS: dict[str, str] = {
    "preparing": "#9fb7d9",
    "updating": "#3d6fc4",
    "previewing": "#7b61c4",
    "destroying": "#c44a3d",
    "refreshing": "#2e9e8f",
    "checking": "#5a9e2e",
    "terraform plan": "#c48a1f",
}
OTHER_PHASE = "#8a8a8a"
RUN_STEP_COLOURS: dict[str, str] = {"preflight": "#5a9e2e"}
TICKS_S = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200)


def seconds_text(value: float) -> str:
    """12.3 s, 4 m 05 s, 1 h 02 m."""
    if value < 60:
        return f"{value:.1f} s"
    if value < 3600:
        minutes, secs = divmod(round(value), 60)
        return f"{minutes} m {secs:02d} s"
    hours, rest = divmod(round(value), 3600)
    return f"{hours} h {rest // 60:02d} m"


def phase_colour(name: str) -> str:
    for phase, colour in PHASE_COLOURS.items():
        if name == phase or name.startswith(phase + " "):
            return colour
    return OTHER_PHASE


def _tick(total: float) -> float:
    return next((step for step in TICKS_S if total / step <= 10), TICKS_S[-1])


def _tick_label(value: float, step: float) -> str:
    if value == 0:
        return "0"
    if step < 1:
        return f"{value:.1f}s"
    if value < 60:
        return f"{value:g}s"
    if value < 3600:
        minutes, secs = divmod(int(value), 60)
        return f"{minutes}m{secs:02d}" if secs else f"{minutes}m"
    hours, minutes = divmod(int(value) // 60, 60)
    return f"{hours}h{minutes:02d}" if minutes else f"{hours}h"


@dataclass
class _Layout:
    total_s: float
    rows: list[tuple[str, Any, float]]  # ("run" | "wave" | "stack", the thing, y)
    height: float

    def x(self, seconds: float) -> float:
        return round(LABEL_W + max(0.0, seconds) / self.total_s * CHART_W, 1)

    def width(self, start: float, end: float) -> float:
        return max(1.0, round(self.x(end) - self.x(start), 1))


def _layout(timeline: Timeline) -> _Layout:
    ends = [timeline.duration_s, *(r.end_s for r in timeline.stacks)]
    ends += [s.end_s for r in timeline.stacks for s in r.steps] + [w.end_s for w in timeline.waves]
    total = max([*ends, 0.001])
    rows: list[tuple[str, Any, float]] = [("run", None, AXIS_H)]
    y = AXIS_H + ROW_H
    waves = {w.index: w for w in timeline.waves}
    current: int | None = None
    for row in timeline.stacks:
        if row.wave is not None and row.wave != current:
            current = row.wave
            wave = waves.get(row.wave) or Wave(row.wave, None, row.start_s, row.end_s, "")
            rows.append(("wave", wave, y))
            y += WAVE_H
        rows.append(("stack", row, y))
        y += ROW_H
    return _Layout(total, rows, y + 8)


def _axis(layout: _Layout) -> str:
    step = _tick(layout.total_s)
    parts = ['<g class="axis" font-size="11" fill="#555">']
    value = 0.0
    while value <= layout.total_s + 1e-9:
        x = layout.x(value)
        parts.append(
            f'<line x1="{x}" y1="{AXIS_H - 6}" x2="{x}" y2="{layout.height}" stroke="#e6e6e6"/>'
            f'<text x="{x}" y="{AXIS_H - 10}" text-anchor="middle">{_tick_label(value, step)}</text>'
        )
        value = round(value + step, 6)
    parts.append("</g>")
    return "".join(parts)


def _run_row(timeline: Timeline, layout: _Layout, y: float) -> str:
    mid = y + ROW_H / 2
    parts = [
        f'<g class="run" data-command="{text(timeline.command)}">'
        f'<text x="4" y="{mid + 4}" font-size="12" font-weight="600">{text(timeline.name, 40)}</text>'
        f'<rect x="{layout.x(0)}" y="{mid - 2}" width="{layout.width(0, timeline.duration_s)}" height="4" '
        f'fill="#c8c8c8"><title>{text(timeline.name)}: {seconds_text(timeline.duration_s)}</title></rect>'
    ]
    for step in timeline.run_steps:
        colour = RUN_STEP_COLOURS.get(step.name, OTHER_PHASE)
        parts.append(
            f'<rect class="run-step" data-name="{text(step.name)}" x="{layout.x(step.start_s)}" '
            f'y="{mid - BAR_H / 2}" width="{layout.width(step.start_s, step.end_s)}" height="{BAR_H}" '
            f'fill="{colour}"><title>{text(step.name)}: {seconds_text(step.duration_s)}</title></rect>'
        )
    parts.append("</g>")
    return "".join(parts)


def _wave_band(wave: Wave, layout: _Layout, y: float, rows_below: int) -> str:
    label = (
        f"wave {wave.index}"
        + (f" of {wave.of}" if wave.of else "")
        + (f" · {wave.state}" if wave.state else "")
    )
    height = WAVE_H + rows_below * ROW_H
    fill = "#fbe9e7" if wave.state == "halted" else ("#eef3fb" if wave.index % 2 else "#f3f0fa")
    return (
        f'<g class="wave" data-wave="{wave.index}" data-state="{text(wave.state)}">'
        f'<rect x="{layout.x(wave.start_s)}" y="{y}" width="{layout.width(wave.start_s, wave.end_s)}" '
        f'height="{height}" fill="{fill}" stroke="#c9d3e6"/>'
        f'<text x="4" y="{y + 14}" font-size="12" font-style="italic" fill="#35507a">{text(label)}</text>'
        f'<text x="{layout.x(wave.start_s) + 4}" y="{y + 14}" font-size="11" fill="#35507a">'
        f"{seconds_text(wave.end_s - wave.start_s)}</text></g>"
    )


def _stack_row(row: StackRow, layout: _Layout, y: float, tolerance: float) -> str:
    top = y + 3
    mid = top + BAR_H / 2
    status = row.status or "?"
    attrs = (
        f'class="stack{" critical" if row.critical else ""}{" failed" if row.failed else ""}" '
        f'data-stack="{text(row.stack)}" data-kind="{text(row.kind)}" data-status="{text(status)}" '
        f'data-wave="{row.wave if row.wave is not None else ""}" data-critical="{str(row.critical).lower()}" '
        f'data-wait-s="{row.wait_s:.3f}" data-duration-s="{row.duration_s:.3f}"'
    )
    label_colour = "#8a0c0c" if row.failed else "#1d1d1f"
    parts = [
        f"<g {attrs}><title>{text(row.stack)} ({text(row.kind)}): {text(status)}, "
        f"{seconds_text(row.duration_s)}"
        + (f", waited {seconds_text(row.wait_s)}" if row.wait_s > tolerance else "")
        + "</title>",
        f'<text x="{4 + (12 if row.wave is not None else 0)}" y="{mid + 4}" font-size="12" '
        f'fill="{label_colour}"{BOLD if row.critical else ""}>{text(row.stack, 34)}</text>',
    ]
    if row.wait_s > tolerance:
        x1, x2 = layout.x(row.ready_s), layout.x(row.start_s)
        parts.append(
            f'<line class="wait" x1="{x1}" y1="{mid}" x2="{x2}" y2="{mid}" stroke="{WAIT}" '
            f'stroke-width="2" stroke-dasharray="4,3"/>'
            f'<line x1="{x1}" y1="{mid - 5}" x2="{x1}" y2="{mid + 5}" stroke="{WAIT}" stroke-width="2"/>'
        )
    parts.append(
        f'<rect class="bar" x="{layout.x(row.start_s)}" y="{top}" '
        f'width="{layout.width(row.start_s, row.end_s)}" height="{BAR_H}" fill="#dcdcdc"/>'
    )
    for phase in row.phases:
        parts.append(
            f'<rect class="phase" data-phase="{text(phase.name)}" x="{layout.x(phase.start_s)}" y="{top}" '
            f'width="{layout.width(phase.start_s, phase.end_s)}" height="{BAR_H}" '
            f'fill="{phase_colour(phase.name)}"><title>{text(phase.name)}: {seconds_text(phase.duration_s)}'
            "</title></rect>"
        )
    for step in row.steps:
        parts.append(
            f'<rect class="step" data-name="{text(step.name)}" x="{layout.x(step.start_s)}" '
            f'y="{top + BAR_H + 1}" width="{layout.width(step.start_s, step.end_s)}" height="{STEP_H}" '
            f'fill="{"#b3261e" if step.error else "#444"}"><title>{text(step.name)}: '
            f"{seconds_text(step.duration_s)}</title></rect>"
        )
    if row.critical:
        parts.append(
            f'<rect class="critical-outline" x="{layout.x(row.start_s) - 1.5}" y="{top - 1.5}" '
            f'width="{layout.width(row.start_s, row.end_s) + 3}" height="{BAR_H + 3}" fill="none" '
            f'stroke="{CRITICAL}" stroke-width="2.5"/>'
        )
    tail = seconds_text(row.duration_s) + (" ✕ failed" if row.failed else "")
    parts.append(
        f'<text x="{layout.x(row.end_s) + 6}" y="{mid + 4}" font-size="11" '
        f'fill="{"#8a0c0c" if row.failed else "#555"}">{text(tail)}</text></g>'
    )
    return "".join(parts)


def _path_links(timeline: Timeline, layout: _Layout, ys: dict[str, float]) -> str:
    parts = []
    for before, after in zip(timeline.longest_path, timeline.longest_path[1:], strict=False):
        first, second = timeline.row(before), timeline.row(after)
        y1, y2 = ys[before] + 3 + BAR_H / 2, ys[after] + 3 + BAR_H / 2
        x1, x2 = layout.x(first.end_s), layout.x(second.start_s)
        parts.append(
            f'<path class="longest-path" d="M{x1} {y1} V{y2} H{max(x1, x2)}" fill="none" '
            f'stroke="{CRITICAL}" stroke-width="2" stroke-dasharray="1,0"/>'
        )
    return "".join(parts)


def timeline_svg(timeline: Timeline) -> str:
    """The timeline as one inline SVG (no script, no external reference)."""
    layout = _layout(timeline)
    width = LABEL_W + CHART_W + TAIL_W
    parts = [
        f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{layout.height}" '
        f'role="img" aria-label="Timeline of {text(timeline.name)}" font-family="system-ui,sans-serif">',
        _axis(layout),
    ]
    ys: dict[str, float] = {}
    stacks_after: dict[int, int] = {}
    for position, (kind, thing, _y) in enumerate(layout.rows):
        if kind == "wave":
            count = 0
            for later_kind, later, _ in layout.rows[position + 1 :]:
                if later_kind != "stack" or later.wave != thing.index:
                    break
                count += 1
            stacks_after[position] = count
    for position, (kind, thing, y) in enumerate(layout.rows):
        if kind == "wave":
            parts.append(_wave_band(thing, layout, y, stacks_after[position]))
    for kind, thing, y in layout.rows:
        if kind == "run":
            parts.append(_run_row(timeline, layout, y))
        elif kind == "stack":
            ys[thing.key] = y
            parts.append(_stack_row(thing, layout, y, timeline.tolerance_s))
    parts.append(_path_links(timeline, layout, ys))
    parts.append("</svg>")
    return "".join(parts)


def _legend(timeline: Timeline) -> str:
    phases = dict.fromkeys(p.name for r in timeline.stacks for p in r.phases)
    chips = [
        f'<span><svg width="14" height="10"><rect width="14" height="10" fill="{phase_colour(name)}"/></svg> '
        f"{text(name)}</span>"
        for name in phases
    ]
    chips.append(
        f'<span><svg width="22" height="10"><line x1="0" y1="5" x2="22" y2="5" stroke="{WAIT}" '
        'stroke-width="2" stroke-dasharray="4,3"/></svg> waited (ready → start)</span>'
    )
    chips.append(
        '<span><svg width="14" height="10"><rect width="14" height="8" y="1" fill="#444"/></svg> '
        "steps (terraform, the gate, kubeconfig)</span>"
    )
    chips.append(
        f'<span><svg width="22" height="12"><rect x="1" y="1" width="20" height="10" fill="none" '
        f'stroke="{CRITICAL}" stroke-width="2.5"/></svg> longest path</span>'
    )
    return f'<p class="timeline-legend">{" ".join(chips)}</p>'


def _table(timeline: Timeline) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "stack",
            "kind",
            "wave",
            "status",
            "ready",
            "started",
            "waited",
            "took",
            "phases",
            "longest path",
        )
    )
    rows = []
    for row in timeline.stacks:
        phases = ", ".join(f"{text(p.name)} {seconds_text(p.duration_s)}" for p in row.phases) or "—"
        waited = seconds_text(row.wait_s) if row.wait_s > timeline.tolerance_s else "—"
        rows.append(
            f'<tr data-stack="{text(row.stack)}" data-critical="{str(row.critical).lower()}">'
            f"<td><code>{text(row.stack)}</code></td><td>{text(row.kind)}</td>"
            f"<td>{row.wave if row.wave is not None else '—'}</td><td>{text(row.status or '?')}</td>"
            f"<td>+{seconds_text(row.ready_s)}</td><td>+{seconds_text(row.start_s)}</td><td>{waited}</td>"
            f"<td>{seconds_text(row.duration_s)}</td><td>{phases}"
            + (f" · {row.engine_spans} engine span(s)" if row.engine_spans else "")
            + f"</td><td>{'yes' if row.critical else ''}</td></tr>"
        )
    return (
        f'<table class="timeline-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def timeline_section(timeline: Timeline) -> str:
    """The timeline for a page: a summary line, the SVG, its legend and a table of the stacks."""
    path = [timeline.row(key).stack for key in timeline.longest_path]
    waited = sum(1 for r in timeline.stacks if r.wait_s > timeline.tolerance_s)
    summary = [
        f"<code>{text(timeline.name)}</code>"
        + (f" of fleet <b>{text(timeline.fleet)}</b>" if timeline.fleet else ""),
        f"started {text(timeline.started_at)}",
        f"took {seconds_text(timeline.duration_s)}",
        f"{len(timeline.stacks)} stack(s)" + (f" in {len(timeline.waves)} wave(s)" if timeline.waves else ""),
        f"{waited} waited",
    ]
    if timeline.status:
        summary.append(f"status {text(timeline.status)}")
    longest = (
        f'<p class="longest-path" data-stacks="{text(" ".join(path), 4000)}"><b>Longest path</b> '
        f"({seconds_text(timeline.longest_path_s)}): "
        + " → ".join(f"<code>{text(stack)}</code>" for stack in path)
        + "</p>"
        if path
        else "<p>No stack ran in this trace.</p>"
    )
    return (
        f'<div class="timeline" data-command="{text(timeline.command)}">'
        f'<p class="meta">{" · ".join(summary)}</p>{longest}'
        f'<div class="timeline-chart">{timeline_svg(timeline)}</div>'
        f"{_legend(timeline)}{_table(timeline)}</div>"
    )
