"""What the runner is asked to do: one stack (`StackOp`) and one of the engine's four commands on it
(`StackCommand`), and the change counts every result reports."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from npa_pulumi.output.results import StackKind, StackResult

CHANGE_KINDS = ("create", "update", "replace", "delete", "same")


def change_counts(changes: Mapping[Any, Any] | None) -> dict[str, int]:
    """Resource-change counts keyed by plain operation names, every standard kind present (0 when
    absent) so JSON readers can rely on `changes.create` etc."""
    raw = {str(getattr(k, "value", k)): int(v) for k, v in (changes or {}).items()}
    return {**{kind: raw.pop(kind, 0) for kind in CHANGE_KINDS}, **raw}


class StackCommand(StrEnum):
    """The engine commands the runner runs on a stack (the values are the engine's own words, which the
    per-stack log file names and the trace's `npa.command` carry)."""

    UP = "up"
    PREVIEW = "preview"
    REFRESH = "refresh"
    DESTROY = "destroy"

    @property
    def creates_stack(self) -> bool:
        """Whether a stack that does not exist yet is made for it (destroy and refresh find none)."""
        return self in (StackCommand.UP, StackCommand.PREVIEW)

    @property
    def verb(self) -> str:
        """The progress view's phase while the engine runs it."""
        return _VERBS[self]


_VERBS = {
    StackCommand.UP: "updating",
    StackCommand.PREVIEW: "previewing",
    StackCommand.DESTROY: "destroying",
    StackCommand.REFRESH: "refreshing",
}


@dataclass
class StackOp:
    """One stack and what to run for it."""

    stack: str
    kind: StackKind
    project_key: str
    cluster_name: str | None
    program: Callable[[], None] | None
    tags: dict[str, str]
    # False when the stack is known to have been deployed by npa-pulumi (and so tagged) before: setting
    # tags costs a CLI round trip per tag.
    tags_needed: bool = True
    # Entries for the built-in policy pack's config, for this stack's run only, merged over the user's
    # `--policy-config` per policy (e.g. the node groups Terraform's plan replaces). Not secret.
    policy_config: dict[str, dict[str, Any]] | None = None
    # A cluster stack with a health gate: the lifecycle state recorded while the gate's step runs
    # (engine/lifecycle.py); "" when it has none.
    gate_state: str = ""
    # ... and the component type (`:<Type>`) of its backend's own gate, whose start is that step too.
    gate_type: str = ""
    backend: str | None = None  # a cluster stack's backend (spec.constants.BackendKind), in its result
    # A cluster stack's project stack: a new stack is made with that stack's passphrase salt, so that its
    # engine runs, which open both stacks (the StackReference), derive the passphrase's key once, not twice
    # (`StackSelector._key_shared`). None: a salt of its own.
    key_shared_with: str | None = None

    def result(self, status: str, **fields: Any) -> StackResult:
        return StackResult(
            stack=self.stack,
            kind=self.kind,
            project_key=self.project_key,
            cluster_name=self.cluster_name,
            status=status,
            **({"backend": self.backend} if self.backend and "backend" not in fields else {}),
            **fields,
        )
