"""Live progress on stderr: one line per stack (phase, resource counts, elapsed).

On a terminal it is a rich live table; otherwise (CI logs, pipes, `--output json` into a file) each phase
change is one plain line, so logs stay readable and stdout is never touched.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.live import Live
from rich.table import Table

from npa_pulumi.cloud.redaction import scrub
from npa_pulumi.runtime import tracing

HEADLINE_CHARS = 300


def headline(error: str) -> str:
    """A failure's first non-empty line, cut to HEADLINE_CHARS and scrubbed like a pull-request comment: the
    reason beside a failed stack's progress line, so a log of `--output json` (stdout elsewhere) still says
    why. The whole error is in the result."""
    first = scrub(next((line.strip() for line in error.splitlines() if line.strip()), ""))
    return first if len(first) <= HEADLINE_CHARS else first[: HEADLINE_CHARS - 1] + "…"


@dataclass
class StackLine:
    stack: str
    phase: str = "queued"
    started: float | None = None
    finished: float | None = None
    resources_started: int = 0
    resources_done: int = 0
    note: str = ""

    def elapsed(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.monotonic()) - self.started


@dataclass
class Progress:
    console: Console = field(default_factory=lambda: Console(stderr=True, highlight=False))
    lines: dict[str, StackLine] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _live: Live | None = None
    enabled: bool = True

    def __post_init__(self) -> None:
        # Asked on every phase change (tens of thousands in a large fleet's command): the answer is fixed.
        self._terminal = self.console.is_terminal and sys.stderr.isatty()

    @property
    def interactive(self) -> bool:
        return self.enabled and self._terminal

    def __enter__(self) -> Progress:
        if self.interactive:
            # Live renders `self` (`__rich__`) at its own pace, 4 times a second: never per event, which
            # at 10,000 stacks and three events each rebuilt a 10,000-row table 30,000 times.
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __rich__(self) -> Table:
        return self._render()

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)  # its last refresh shows the final state
            self._live = None

    def add(self, stack: str) -> None:
        with self._lock:
            self.lines.setdefault(stack, StackLine(stack))

    def phase(self, stack: str, phase: str, note: str = "") -> None:
        with self._lock:
            line = self.lines.setdefault(stack, StackLine(stack))
            if line.started is None and phase not in ("queued",):
                line.started = time.monotonic()
            if phase in ("done", "failed", "skipped", "unchanged", "absent", "destroyed"):
                line.finished = time.monotonic()
            line.phase = phase
            line.note = note
        tracing.stack_phase(stack, phase, note)  # each phase a span under its stack's (when tracing)
        if not self.interactive and self.enabled:
            suffix = f" - {note}" if note else ""
            # A plain line, written as it is (no rich rendering: a fleet of 10,000 stacks writes 30,000).
            with self._lock:
                self.console.file.write(f"[{line.elapsed():6.1f}s] {stack}: {phase}{suffix}\n")

    def resource_event(self, stack: str, finished: bool) -> None:
        with self._lock:
            line = self.lines.setdefault(stack, StackLine(stack))
            if finished:
                line.resources_done += 1
            else:
                line.resources_started += 1

    def message(self, text: str) -> None:
        if self.enabled:
            self.console.print(text, markup=False, soft_wrap=True)

    def _render(self) -> Table:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        table.add_column("stack")
        table.add_column("phase")
        table.add_column("resources", justify="right")
        table.add_column("elapsed", justify="right")
        table.add_column("")
        with self._lock:
            lines = list(self.lines.values())
        shown, hidden = _fitting(lines, max(MIN_ROWS, self.console.size.height - 3))
        for line in shown:
            style = {"failed": "red", "done": "green", "unchanged": "dim"}.get(line.phase, "")
            table.add_row(
                line.stack,
                f"[{style}]{line.phase}[/]" if style else line.phase,
                f"{line.resources_done}/{line.resources_started}",
                f"{line.elapsed():.0f}s",
                line.note,
            )
        if hidden:
            counts: dict[str, int] = {}
            for line in hidden:
                counts[line.phase] = counts.get(line.phase, 0) + 1
            summary = ", ".join(f"{n} {phase}" for phase, n in sorted(counts.items()))
            table.add_row(f"… {len(hidden)} more", summary, "", "", "")
        return table


MIN_ROWS = 10


def _fitting(lines: list[StackLine], rows: int) -> tuple[list[StackLine], list[StackLine]]:
    """(the lines to show, in their order, the others): all when they fit the terminal; otherwise the
    stacks still running first, then those finished last, and one summary row for the rest."""
    if len(lines) <= rows:
        return lines, []
    running = [line for line in lines if line.started is not None and line.finished is None]
    finished = sorted(
        (line for line in lines if line.finished is not None), key=lambda x: x.finished or 0.0, reverse=True
    )
    keep = {id(line) for line in [*running, *finished][: rows - 1]}
    return [line for line in lines if id(line) in keep], [line for line in lines if id(line) not in keep]
