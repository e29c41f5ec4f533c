"""One OpenTelemetry trace per command, when asked: `--trace otlp` or `--trace-file FILE`.

    tracing.start(TraceSettings(exporter="otlp"), "npa-pulumi up", {...}, scrub=scrub)  # the CLI
    tracing.stack_phase(stack, "updating")        # output/progress.py: each phase a span under its stack
    with tracing.span("terraform apply", stack=stack): ...   # anything under a stack's current phase
    tracing.finish("ok", {...})                   # end the root span, export, write the file

The tree: the command's root span → a rollout's wave spans (`assign_wave`) → one span per stack → its phase
spans (the progress lines' phases: preparing, updating, destroying, ...) → what runs inside a phase (the
health gate's and fabric check's steps, terraform's commands). The Pulumi engine (`--otel-traces`, started
with `TRACEPARENT` = its stack's span) writes its own spans to a private file per run; they are read back
(`collect_engine_trace`), scrubbed, and exported with this process's spans, so the engine's spans hang under
the stack that ran it and its export never needs the collector's headers on a command line.

Off (the default), every function here is a check of one module global: the OpenTelemetry SDK is imported
only by `start`. Standard library only at import, like the rest of runtime. Scrubbing is the caller's
(`start(scrub=...)`: runtime knows no cloud ids): every string attribute and span name passes through it.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

EXPORTERS = ("otlp",)
SERVICE_NAME = "npa-pulumi"
TERMINAL_PHASES = frozenset({"done", "failed", "skipped", "unchanged", "absent", "destroyed"})
_ID_KEYS = ("traceId", "spanId", "parentSpanId")
AttributeValue = str | bool | int | float


@dataclass(frozen=True)
class TraceSettings:
    """What the command asked for: `exporter` "otlp" (the standard OTEL_EXPORTER_OTLP_* variables), and/or
    an OTLP JSON `file`. Neither: no trace."""

    exporter: str | None = None
    file: str | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.exporter or self.file)


@dataclass
class _StackSpans:
    span: Any
    phase: Any | None = None
    phase_name: str = ""
    children: dict[str, Any] = field(default_factory=dict)


class _Tracing:
    def __init__(self, settings: TraceSettings, scrub: Callable[[str], str]) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from npa_pulumi import __version__

        self.settings = settings
        self.scrub = scrub
        self.lock = threading.Lock()
        self.memory = InMemorySpanExporter()
        resource = Resource.create({"service.name": SERVICE_NAME, "service.version": __version__})
        self.provider = TracerProvider(resource=resource)  # never the global provider: the SDK has its own
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.tracer = self.provider.get_tracer("npa_pulumi")
        self.root: Any = None
        self.stacks: dict[str, _StackSpans] = {}
        self.waves: dict[int, Any] = {}
        self.wave_of: dict[str, int] = {}
        self.wave_count = 0
        self.engine_requests: list[dict[str, Any]] = []  # the engines' OTLP JSON documents, scrubbed
        import tempfile

        self.engine_dir = Path(tempfile.mkdtemp(prefix="npa-engine-trace-"))
        self.engine_dir.chmod(0o700)
        self.engine_files = 0

    def attributes(self, attributes: Mapping[str, Any] | None) -> dict[str, AttributeValue]:
        clean: dict[str, AttributeValue] = {}
        for name, value in (attributes or {}).items():
            if value is None:
                continue
            if isinstance(value, bool | int | float):
                clean[name] = value
            else:
                clean[name] = self.scrub(str(value))
        return clean

    def start_span(self, name: str, parent: Any, attributes: Mapping[str, Any] | None = None) -> Any:
        from opentelemetry import trace

        context = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(
            self.scrub(name), context=context, attributes=self.attributes(attributes)
        )


_ACTIVE: _Tracing | None = None


def active() -> bool:
    return _ACTIVE is not None


def start(
    settings: TraceSettings,
    name: str,
    attributes: Mapping[str, Any] | None = None,
    scrub: Callable[[str], str] = lambda text: text,
) -> bool:
    """Begin the command's trace (its root span); False when none was asked for."""
    global _ACTIVE
    if not settings.enabled:
        return False
    if settings.exporter is not None and settings.exporter not in EXPORTERS:
        raise ValueError(f"unknown trace exporter {settings.exporter!r} (known: {', '.join(EXPORTERS)})")
    tracing = _Tracing(settings, scrub)
    tracing.root = tracing.start_span(name, _caller_span(os.environ.get("TRACEPARENT", "")), attributes)
    _ACTIVE = tracing
    return True


def finish(status: str, attributes: Mapping[str, Any] | None = None) -> list[str]:
    """End every open span and the root, then export (OTLP/HTTP) and write the file. Returns warnings: a
    trace that could not be sent never fails the command."""
    global _ACTIVE
    tracing = _ACTIVE
    if tracing is None:
        return []
    _ACTIVE = None
    with tracing.lock:
        for index in list(tracing.waves):
            tracing.waves.pop(index).end()
        for spans in tracing.stacks.values():
            _end_stack(spans)
        tracing.stacks.clear()
    tracing.root.set_attributes(tracing.attributes({**(attributes or {}), "npa.status": status}))
    if status not in ("ok", "unchanged"):
        from opentelemetry.trace import Status, StatusCode

        tracing.root.set_status(Status(StatusCode.ERROR, tracing.scrub(status)))
    tracing.root.end()
    warnings: list[str] = []
    document = _document(tracing)
    if tracing.settings.file:
        try:
            path = Path(tracing.settings.file).expanduser()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(document) + "\n", encoding="utf-8")
        except OSError as err:
            warnings.append(f"could not write the trace file {tracing.settings.file}: {err}")
    if tracing.settings.exporter == "otlp":
        warning = _post_otlp(document)
        if warning:
            warnings.append(warning)
    tracing.provider.shutdown()
    _remove_tree(tracing.engine_dir)
    return warnings


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None, stack: str | None = None) -> Iterator[None]:
    """A span around the block: under `stack`'s current phase (or the stack's span, or the root)."""
    tracing = _ACTIVE
    if tracing is None:
        yield
        return
    with tracing.lock:
        parent = _parent(tracing, stack)
    current = tracing.start_span(name, parent, attributes)
    token = _CURRENT.set(current)
    try:
        yield
    except BaseException as err:
        _failed(current, err)
        raise
    finally:
        _CURRENT.reset(token)
        current.end()


def traced(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` in a span of its own when tracing is on (e.g. the preflight gate); `func` itself otherwise."""
    if _ACTIVE is None:
        return func

    def run(*args: Any, **kwargs: Any) -> Any:
        with span(name):
            return func(*args, **kwargs)

    return run


def assign_wave(stack: str, wave: int, of: int) -> None:
    """A rollout put `stack` in wave `wave` of `of`: its span goes under that wave's span."""
    tracing = _ACTIVE
    if tracing is None:
        return
    with tracing.lock:
        tracing.wave_of[stack] = wave
        tracing.wave_count = of


def wave_finished(wave: int, state: str, attributes: Mapping[str, Any] | None = None) -> None:
    tracing = _ACTIVE
    if tracing is None:
        return
    with tracing.lock:
        current = _wave_span(tracing, wave)
        del tracing.waves[wave]
    current.set_attributes(tracing.attributes({**(attributes or {}), "npa.wave.state": state}))
    if state == "halted":
        from opentelemetry.trace import Status, StatusCode

        current.set_status(Status(StatusCode.ERROR, "the rollout halted at this wave"))
    current.end()


def stack_phase(stack: str, phase: str, note: str = "") -> None:
    """A stack's progress line changed phase (output/progress.py): the previous phase's span ends, the new
    one starts under the stack's span (begun at its first phase); a final phase ends the stack's span."""
    tracing = _ACTIVE
    if tracing is None or phase == "queued":
        return
    with tracing.lock:
        spans = tracing.stacks.get(stack)
        if spans is None:
            parent = _wave_span(tracing, tracing.wave_of[stack]) if stack in tracing.wave_of else tracing.root
            spans = tracing.stacks[stack] = _StackSpans(
                tracing.start_span(stack, parent, {"npa.stack": stack})
            )
        if spans.phase is not None:
            spans.phase.end()
            spans.phase = None
        if phase in TERMINAL_PHASES:
            spans.span.set_attributes(tracing.attributes({"npa.status": phase, "npa.note": note or None}))
            if phase == "failed":
                from opentelemetry.trace import Status, StatusCode

                spans.span.set_status(Status(StatusCode.ERROR, tracing.scrub(note)[:300]))
            _end_stack(tracing.stacks.pop(stack))
            return
        spans.phase = tracing.start_span(phase, spans.span, {"npa.stack": stack, "npa.phase": phase})
        spans.phase_name = phase


def stack_attributes(stack: str, attributes: Mapping[str, Any]) -> None:
    """Attributes of a stack's span (kind, project, cluster, backend, counts), while it is open."""
    tracing = _ACTIVE
    if tracing is None:
        return
    with tracing.lock:
        spans = tracing.stacks.get(stack)
        if spans is not None:
            spans.span.set_attributes(tracing.attributes(attributes))


def child_started(stack: str, key: str, name: str, attributes: Mapping[str, Any] | None = None) -> None:
    """A step inside a stack's current phase began (a gate's resource, seen in the engine's events)."""
    tracing = _ACTIVE
    if tracing is None:
        return
    with tracing.lock:
        spans = tracing.stacks.get(stack)
        if spans is None or key in spans.children:
            return
        spans.children[key] = tracing.start_span(name, spans.phase or spans.span, attributes)


def child_finished(stack: str, key: str, failed: str | None = None) -> None:
    tracing = _ACTIVE
    if tracing is None:
        return
    with tracing.lock:
        spans = tracing.stacks.get(stack)
        child = spans.children.pop(key, None) if spans is not None else None
    if child is not None:
        if failed:
            from opentelemetry.trace import Status, StatusCode

            child.set_status(Status(StatusCode.ERROR, tracing.scrub(failed)[:300]))
        child.end()


def traceparent(stack: str | None = None) -> str | None:
    """The W3C `traceparent` of what runs now (the innermost span of this thread's block, else `stack`'s
    current phase or span, else the root), for a child process's `TRACEPARENT`; None when off."""
    tracing = _ACTIVE
    if tracing is None:
        return None
    current = _CURRENT.get()
    if current is None:
        with tracing.lock:
            current = _parent(tracing, stack)
    context = current.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def engine_trace_file(stack: str) -> Path | None:
    """A private file for one engine run's `--otel-traces file://...` (None when off)."""
    tracing = _ACTIVE
    if tracing is None:
        return None
    with tracing.lock:
        tracing.engine_files += 1
        return tracing.engine_dir / f"{tracing.engine_files:04d}-{Path(stack).name}.jsonl"


def collect_engine_trace(path: Path) -> None:
    """Read an engine run's OTLP JSON lines back, scrubbed, to be exported with the command's spans."""
    tracing = _ACTIVE
    if tracing is None:
        return
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return
    finally:
        path.unlink(missing_ok=True)
    trace_id = f"{tracing.root.get_span_context().trace_id:032x}"
    documents = []
    for line in lines:
        try:
            document = json.loads(line)
        except ValueError:
            continue
        if isinstance(document, dict):
            documents.append(scrub_document(_of_trace(document, trace_id), tracing.scrub))
    with tracing.lock:
        tracing.engine_requests.extend(documents)


# ------------------------------------------------------------------------------------ OTLP JSON


def scrub_document(document: Any, scrub: Callable[[str], str]) -> Any:
    """An OTLP JSON document with every string value (span names, attribute values, events) scrubbed; the
    ids and keys kept as they are."""
    if isinstance(document, dict):
        return {
            key: value if key in _ID_KEYS or key == "key" else scrub_document(value, scrub)
            for key, value in document.items()
        }
    if isinstance(document, list):
        return [scrub_document(item, scrub) for item in document]
    if isinstance(document, str):
        return scrub(document)
    return document


def _of_trace(document: dict[str, Any], trace_id: str) -> dict[str, Any]:
    """Only the spans of the command's trace: the engine starts a few traces of its own (storage writes,
    log calls outside its root span), which would each be a trace of their own at the collector."""
    resource_spans = []
    for resource in document.get("resourceSpans") or []:
        scopes = []
        for scope in resource.get("scopeSpans") or []:
            spans = [s for s in scope.get("spans") or [] if s.get("traceId") == trace_id]
            if spans:
                scopes.append({**scope, "spans": spans})
        if scopes:
            resource_spans.append({**resource, "scopeSpans": scopes})
    return {"resourceSpans": resource_spans}


def _ids(document: Any, convert: Callable[[str], str]) -> Any:
    if isinstance(document, dict):
        return {
            key: convert(value)
            if key in _ID_KEYS and isinstance(value, str) and value
            else _ids(value, convert)
            for key, value in document.items()
        }
    if isinstance(document, list):
        return [_ids(item, convert) for item in document]
    return document


def _hex(value: str) -> str:
    return base64.b64decode(value).hex()


def _b64(value: str) -> str:
    return base64.b64encode(bytes.fromhex(value)).decode("ascii")


def _document(tracing: _Tracing) -> dict[str, Any]:
    """The whole trace as one OTLP JSON `ExportTraceServiceRequest` (ids in hex, as OTLP JSON has them)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request = encode_spans(tracing.memory.get_finished_spans())
    ours = _ids(MessageToDict(request), _hex)
    resource_spans = list(ours.get("resourceSpans") or [])
    for engine in tracing.engine_requests:
        resource_spans.extend(engine.get("resourceSpans") or [])
    return {"resourceSpans": resource_spans}


def to_protobuf(document: Mapping[str, Any]) -> bytes:
    """An OTLP JSON document as the protobuf `ExportTraceServiceRequest` OTLP/HTTP sends."""
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    message = ExportTraceServiceRequest()
    ParseDict(_ids(dict(document), _b64), message, ignore_unknown_fields=True)
    return message.SerializeToString()


def otlp_endpoint(environ: Mapping[str, str] = os.environ) -> str:
    """Where OTLP/HTTP traces go: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
    OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces, else the collector's default on localhost."""
    traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
    return base.rstrip("/") + "/v1/traces"


def otlp_headers(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """OTEL_EXPORTER_OTLP_TRACES_HEADERS, else OTEL_EXPORTER_OTLP_HEADERS (`k=v,k2=v2`, URL-encoded)."""
    from opentelemetry.util.re import parse_env_headers

    raw = environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or environ.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    return dict(parse_env_headers(raw, liberal=True))


def _post_otlp(document: Mapping[str, Any]) -> str | None:
    """One OTLP/HTTP export of the whole trace (protobuf), with a few retries; a warning when it failed."""
    import urllib.error
    import urllib.request

    from npa_pulumi.runtime.retry import RetryPolicy, call_with_retry

    endpoint = otlp_endpoint()
    body = to_protobuf(document)
    headers = {**otlp_headers(), "Content-Type": "application/x-protobuf"}

    def send() -> None:
        request = urllib.request.Request(endpoint, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    try:
        call_with_retry(
            send,
            retry_on=OSError,
            what="OTLP trace export",
            policy=RetryPolicy(max_attempts=3, initial_backoff_s=0.5, multiplier=2.0, jitter=0.0),
        )
    except (urllib.error.URLError, OSError) as err:
        return f"could not export the trace to {endpoint}: {err}"
    return None


# ------------------------------------------------------------------------------------ internals

_CURRENT: ContextVar[Any] = ContextVar("npa_trace_span", default=None)


def _parent(tracing: _Tracing, stack: str | None) -> Any:
    current = _CURRENT.get()
    if current is not None:
        return current
    spans = tracing.stacks.get(stack) if stack else None
    if spans is not None:
        # The newest step still open (the Terraform module whose commands run now), else the phase.
        newest = next(reversed(spans.children.values()), None)
        return newest or spans.phase or spans.span
    return tracing.root


def _caller_span(traceparent: str) -> Any:
    """The caller's span (a CI job's `TRACEPARENT`), so that the command's trace continues it; else None."""
    parts = traceparent.strip().split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    try:
        context = SpanContext(
            int(parts[1], 16), int(parts[2], 16), is_remote=True, trace_flags=TraceFlags(int(parts[3], 16))
        )
    except ValueError:
        return None
    return NonRecordingSpan(context) if context.is_valid else None


def _wave_span(tracing: _Tracing, wave: int) -> Any:
    current = tracing.waves.get(wave)
    if current is None:
        of = f" of {tracing.wave_count}" if tracing.wave_count else ""
        current = tracing.waves[wave] = tracing.start_span(
            f"wave {wave}{of}", tracing.root, {"npa.wave": wave, "npa.waves": tracing.wave_count or None}
        )
    return current


def _end_stack(spans: _StackSpans) -> None:
    for child in spans.children.values():
        child.end()
    spans.children.clear()
    if spans.phase is not None:
        spans.phase.end()
        spans.phase = None
    spans.span.end()


def _failed(current: Any, err: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    tracing = _ACTIVE
    message = type(err).__name__
    if tracing is not None:
        message = tracing.scrub(f"{message}: {err}")[:300]
    current.set_status(Status(StatusCode.ERROR, message))


def _remove_tree(directory: Path) -> None:
    for entry in directory.glob("*"):
        entry.unlink(missing_ok=True)
    with suppress(OSError):
        directory.rmdir()
