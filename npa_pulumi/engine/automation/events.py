"""What the engine says while it runs: its event stream (resource diffs, policy results, error diagnostics,
the gates' steps starting) collected for a stack's result, and its text made plain."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.automation.stack_op import change_counts
from npa_pulumi.output.progress import Progress
from npa_pulumi.output.results import PolicyViolation
from npa_pulumi.runtime import tracing

if TYPE_CHECKING:
    from pulumi import automation as auto

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_COLOR_TAGS = re.compile(r"<\{%[^%]*%\}>")


def plain_text(text: str) -> str:
    """The engine's text without its colours (ANSI codes and its own colour tags)."""
    return _COLOR_TAGS.sub("", _ANSI.sub("", text)).strip()


GATE_TYPE_SUFFIX = ":GpuHealthGate"  # components/gpu_health.py's dynamic resource type
FABRIC_TYPE_SUFFIX = ":GpuFabricCheck"  # components/gpu_fabric.py's
RAY_GATE_TYPE_SUFFIX = ":KubeRayGate"  # components/kuberay_gate.py's
_RUNS = ("create", "update", "replace", "create-replacement")  # the steps that run a provider's code
# The steps a trace shows as spans of their own inside the engine's run (runtime/tracing.py), beside the
# gate types of the stack's backend (EventCollector.gate_types).
TRACED_TYPE_SUFFIXES = (GATE_TYPE_SUFFIX, FABRIC_TYPE_SUFFIX, RAY_GATE_TYPE_SUFFIX, ":TerraformModule")


@dataclass
class EventCollector:
    """Counts, diffs, policy results and error diagnostics from the engine's event stream."""

    stack: str
    progress: Progress
    diff: list[dict[str, Any]] = field(default_factory=list)
    policy: list[PolicyViolation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    summary: dict[str, int] | None = None  # the engine's closing resource-change counts
    on_gate: Callable[[], None] | None = None  # called when the engine starts running the health gate
    # The component types (`:<Type>` suffixes) either of which starting is the gate's step: the health
    # gate's, and the stack's backend's own gate (ClusterBackend.gate_type) where it has one.
    gate_types: tuple[str, ...] = (GATE_TYPE_SUFFIX,)
    on_fabric: Callable[[], None] | None = None  # ... and its fabric check (components/gpu_fabric.py)
    on_ray_gate: Callable[[], None] | None = None  # ... and the KubeRay gate (components/kuberay_gate.py)

    def sorted_diff(self) -> list[dict[str, Any]]:
        """The per-resource changes in URN order: the engine registers resources (and providers)
        concurrently, so event order varies between runs; a preview (and its PR comment) must not."""
        return sorted(self.diff, key=lambda d: str(d.get("urn", "")))

    def __call__(self, event: auto.EngineEvent) -> None:
        if event.summary_event is not None:
            changes = event.summary_event.resource_changes or {}
            self.summary = change_counts(changes)
        if event.resource_pre_event is not None:
            meta = event.resource_pre_event.metadata
            op = str(getattr(meta.op, "value", meta.op))
            if self.on_gate is not None and meta.type.endswith(self.gate_types) and op in _RUNS:
                self.on_gate()
            if self.on_fabric is not None and meta.type.endswith(FABRIC_TYPE_SUFFIX) and op in _RUNS:
                self.on_fabric()
            if self.on_ray_gate is not None and meta.type.endswith(RAY_GATE_TYPE_SUFFIX) and op in _RUNS:
                self.on_ray_gate()
            if op in _RUNS and meta.type.endswith((*TRACED_TYPE_SUFFIXES, *self.gate_types)):
                step = meta.type.rsplit(":", 1)[-1]  # a span per gate stage and the fabric check (tracing)
                tracing.child_started(self.stack, meta.urn, step, {"npa.step": step, "npa.op": op})
            if meta.type != "pulumi:pulumi:Stack":
                self.progress.resource_event(self.stack, finished=False)
                if op not in ("same", "read"):
                    self.diff.append(
                        {"urn": meta.urn, "type": meta.type, "op": op, "diffs": list(meta.diffs or [])}
                    )
        elif event.res_outputs_event is not None:
            tracing.child_finished(self.stack, event.res_outputs_event.metadata.urn)
            if event.res_outputs_event.metadata.type != "pulumi:pulumi:Stack":
                self.progress.resource_event(self.stack, finished=True)
        elif event.policy_event is not None:
            pe = event.policy_event
            self.policy.append(
                PolicyViolation(
                    policy=pe.policy_name,
                    pack=pe.policy_pack_name,
                    level=str(pe.enforcement_level).lower(),
                    message=plain_text(pe.message),
                    resource=pe.resource_urn or "",
                )
            )
        elif event.diagnostic_event is not None:
            diag = event.diagnostic_event
            if diag.severity == "error":
                # The dynamic-provider host wraps every provider exception in this gRPC phrase.
                text = plain_text(diag.message).removeprefix("Exception calling application: ")
                if text and text not in self.errors:
                    self.errors.append(text)


_MISSING_PLUGIN = re.compile(
    r"no (resource|analyzer|language) plugin '(?:pulumi-(?:resource|analyzer|language)-)?([\w.-]+)' found"
    r"[^\n]*?at version v?(\d+\.\d+\.\d+)"
)


def missing_plugin_hint(message: str) -> str:
    """The engine's "no resource plugin 'pulumi-resource-X' found ... at version vV" (npa-pulumi turns its
    automatic downloads off), with the one command that provides it where Pulumi's plugin source can be
    reached; offline, `make tools` builds the pinned Kubernetes provider."""
    match = _MISSING_PLUGIN.search(message)
    if match is None:
        return message
    kind, name, version = match.groups()
    return (
        f"{message}; install it with `pulumi plugin install {kind} {name} v{version}` "
        "(offline: `make tools` in a checkout builds the pinned Kubernetes provider)"
    )
