"""A synthetic OTLP JSON trace shaped like the ones `--trace-file` writes (runtime/tracing.py's span tree:
root → waves → stacks → phases → steps, the engine's spans under a phase, the kubeconfig write after its
stack), for the timeline's tests (tests/unit/output/test_timeline.py,
tests/integration/test_report_browser.py).

The run it describes, `npa-pulumi up` of fleet `tl` at `--concurrency 2`, in seconds from its start:

    preflight      2 – 3
    tl.p1          5 – 20     project
    tl.p2          5 – 10     project
    wave 1 of 2   14 – 50     passed
      tl.p2.d     14 – 25     ready at 10 (tl.p2 done): waited 4 s (a lock)
      tl.p1.a     20 – 50     ready at 20 (tl.p1 done)
    wave 2 of 2   50 – 95     halted
      tl.p1.b     50 – 70     ready at 50 (the wave barrier)
      tl.p1.e     50 – 60
      tl.p2.c     60 – 95     ready at 50: waited 10 s for a worker (tl.p1.e's end freed one); failed
    kubeconfig    96 – 97     of tl.p1.a

Its longest path: tl.p1 → tl.p1.a → tl.p1.e → tl.p2.c (90 s); tl.p2, tl.p2.d and tl.p1.b are off it.
"""

from __future__ import annotations

import itertools
from typing import Any

T0 = 1_796_460_000_000_000_000  # ns
TRACE_ID = "8c1c5156e88bc8793e1415737f8cdaea"
_IDS = itertools.count(1)


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # OTLP JSON writes int64 as a string
    return {"stringValue": str(value)}


class TraceBuilder:
    def __init__(self, trace_id: str = TRACE_ID) -> None:
        self.trace_id = trace_id
        self.ours: list[dict[str, Any]] = []
        self.engine: list[dict[str, Any]] = []

    def span(
        self,
        name: str,
        start: float,
        end: float,
        parent: str = "",
        attributes: dict[str, Any] | None = None,
        error: str = "",
        engine: bool = False,
    ) -> str:
        span_id = f"{next(_IDS):016x}"
        span: dict[str, Any] = {
            "traceId": self.trace_id,
            "spanId": span_id,
            "name": name,
            "kind": "SPAN_KIND_INTERNAL",
            "startTimeUnixNano": str(T0 + int(start * 1e9)),
            "endTimeUnixNano": str(T0 + int(end * 1e9)),
            "attributes": [{"key": k, "value": _value(v)} for k, v in (attributes or {}).items()],
            "status": {"code": "STATUS_CODE_ERROR", "message": error} if error else {},
        }
        if parent:
            span["parentSpanId"] = parent
        (self.engine if engine else self.ours).append(span)
        return span_id

    def stack(
        self,
        name: str,
        kind: str,
        project: str,
        phases: list[tuple[str, float, float]],
        parent: str,
        status: str = "done",
        error: str = "",
    ) -> tuple[str, dict[str, str]]:
        start, end = phases[0][1], phases[-1][2]
        attributes = {"npa.stack": name, "npa.kind": kind, "npa.project": project, "npa.status": status}
        stack_id = self.span(name, start, end, parent, attributes, error=error)
        ids = {
            phase: self.span(phase, s, e, stack_id, {"npa.stack": name, "npa.phase": phase})
            for phase, s, e in phases
        }
        return stack_id, ids

    def document(self) -> dict[str, Any]:
        resource = [{"key": "service.name", "value": {"stringValue": "npa-pulumi"}}]
        engine = [{"key": "service.name", "value": {"stringValue": "pulumi-cli"}}]
        return {
            "resourceSpans": [
                {
                    "resource": {"attributes": resource},
                    "scopeSpans": [{"scope": {"name": "npa_pulumi"}, "spans": self.ours}],
                },
                {
                    "resource": {"attributes": engine},
                    "scopeSpans": [{"scope": {"name": "pulumi"}, "spans": self.engine}],
                },
            ]
        }


def up_trace(step_name: str = "terraform apply") -> dict[str, Any]:
    """The run in the module's docstring; `step_name` names tl.p1.a's terraform step."""
    b = TraceBuilder()
    root = b.span(
        "npa-pulumi up", 0, 100, "", {"npa.command": "up", "npa.fleet": "tl", "npa.status": "failed"}
    )
    b.span("preflight", 2, 3, root)
    b.stack("tl.p1", "project", "p1", [("preparing", 5, 6), ("updating", 6, 20)], root)
    b.stack("tl.p2", "project", "p2", [("preparing", 5, 6), ("updating", 6, 10)], root)
    wave1 = b.span("wave 1 of 2", 14, 50, root, {"npa.wave": 1, "npa.waves": 2, "npa.wave.state": "passed"})
    b.stack("tl.p2.d", "cluster", "p2", [("preparing", 14, 15), ("updating", 15, 25)], wave1)
    _, phases = b.stack("tl.p1.a", "cluster", "p1", [("preparing", 20, 21), ("updating", 21, 50)], wave1)
    module = b.span("TerraformModule", 24, 46, phases["updating"], {"npa.step": "TerraformModule"})
    b.span(step_name, 25, 45, module, {"npa.stack": "tl.p1.a"})
    b.span("pulumi-plan", 21, 23, phases["updating"], engine=True)
    b.span("pulumi-update", 23, 49, phases["updating"], engine=True)
    wave2 = b.span("wave 2 of 2", 50, 95, root, {"npa.wave": 2, "npa.waves": 2, "npa.wave.state": "halted"})
    b.stack("tl.p1.b", "cluster", "p1", [("preparing", 50, 51), ("updating", 51, 70)], wave2)
    b.stack("tl.p1.e", "cluster", "p1", [("preparing", 50, 51), ("updating", 51, 60)], wave2)
    b.stack(
        "tl.p2.c",
        "cluster",
        "p2",
        [("preparing", 60, 61), ("updating", 61, 95)],
        wave2,
        status="failed",
        error="the health gate failed",
    )
    b.span("kubeconfig", 96, 97, root, {"npa.stack": "tl.p1.a"})
    return b.document()


def destroy_trace() -> dict[str, Any]:
    """`destroy` of one project with two clusters at --concurrency 2: the project stack waits for both."""
    b = TraceBuilder("00000000000000000000000000000abc")
    root = b.span("npa-pulumi destroy", 0, 40, "", {"npa.command": "destroy", "npa.fleet": "tl"})
    b.stack("tl.p1.a", "cluster", "p1", [("preparing", 1, 2), ("destroying", 2, 10)], root, "destroyed")
    b.stack("tl.p1.b", "cluster", "p1", [("preparing", 1, 2), ("destroying", 2, 30)], root, "destroyed")
    b.stack("tl.p1", "project", "p1", [("preparing", 30, 31), ("destroying", 31, 39)], root, "destroyed")
    return b.document()
