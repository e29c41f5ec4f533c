"""What is recorded of a stack: its outputs, its newest update's result, one resource's output, and the
cluster lifecycle recorded in its tags while a run changes it (engine/lifecycle.py).

Each read takes the DIY fast path (diy_backend) where the backend allows it, and the engine otherwise.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from npa_pulumi.engine import lifecycle
from npa_pulumi.engine.automation import diy_backend
from npa_pulumi.engine.automation.diy_backend import NO_FAST_PATH, SECRET_PLACEHOLDER, checkpoint_outputs
from npa_pulumi.engine.automation.events import EventCollector
from npa_pulumi.engine.automation.selection import StackSelector
from npa_pulumi.engine.automation.stack_op import StackOp
from npa_pulumi.engine.automation.tags import StackTags

if TYPE_CHECKING:
    from pulumi import automation as auto

# The engine's marker for a secret value in an exported deployment.
_SECRET_SIG = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")


def _plain_secret(value: Any) -> Any:
    """An exported output's value: a decrypted secret arrives as {sig, plaintext: JSON text}."""
    if isinstance(value, dict) and value.get(_SECRET_SIG[0]) == _SECRET_SIG[1]:
        plaintext = value.get("plaintext")
        return json.loads(plaintext) if isinstance(plaintext, str) else None
    return value


class StackState:
    """The recorded state of one backend's stacks, for the operations and for the runner."""

    def __init__(self, selector: StackSelector, tags: StackTags) -> None:
        self.selector = selector
        self.tags = tags
        self.backend_url = selector.settings.backend_url
        self.project_name = selector.project_name

    # ----------------------------------------------------------------------------- outputs and history

    def outputs(self, op: StackOp) -> dict[str, Any] | None:
        """The stack's outputs (None when it does not exist); secret values read as `[secret]`."""
        fast = checkpoint_outputs(self.backend_url, op.stack, self.project_name)
        if fast is not NO_FAST_PATH:
            return cast("dict[str, Any] | None", fast)
        stack = self.selector.select(op, create=False)
        if stack is None:
            return None
        return {
            name: (SECRET_PLACEHOLDER if value.secret else value.value)
            for name, value in stack.outputs().items()
        }

    def last_update_failed(self, op: StackOp) -> bool:
        """Whether the stack's newest update failed (False when it has none, or there is no stack)."""
        result = diy_backend.last_update_result(self.backend_url, op.stack, self.project_name)
        if result is NO_FAST_PATH:
            stack = self.selector.select(op, create=False)
            history = stack.history(page_size=1) if stack is not None else []
            result = history[0].result if history else None
        return bool(result == "failed")

    def resource_output(self, op: StackOp, resource_type: str, name: str) -> Any:
        """One output of the stack's first resource of `resource_type`, secrets decrypted (the engine's
        `stack export --show-secrets`); None when the stack, the resource or the output is absent. For the
        callers that need a secret value back (Terraform's state for a preview's plan), never for display."""
        stack = self.selector.select(op, create=False)
        if stack is None:
            return None
        deployment = stack.export_stack().deployment or {}
        for resource in deployment.get("resources") or []:
            if resource.get("type") == resource_type:
                return _plain_secret((resource.get("outputs") or {}).get(name))
        return None

    # ----------------------------------------------------------------------------- lifecycle

    def write_lifecycle(
        self,
        op: StackOp,
        tags: dict[str, str],
        remove: tuple[str, ...] = (),
        stack: auto.Stack | None = None,
    ) -> None:
        """Record lifecycle tags beside the stack (best effort: StackTags.write_lifecycle)."""
        self.tags.write_lifecycle(op, tags, remove, stack)

    def recorded_lifecycle(self, op: StackOp) -> lifecycle.Recorded | None:
        """The lifecycle state recorded beside the stack, when it still holds."""
        return lifecycle.holding(self.tags.read(op))

    def watch_up(self, op: StackOp, stack: auto.Stack, collector: EventCollector) -> None:
        """Before a cluster stack's up: record `provisioning` (its infrastructure applies first; an earlier
        destroy-incomplete no longer holds), and have the engine's events record the gate's states as
        their steps start."""
        self.write_lifecycle(
            op,
            lifecycle.running_tags("provisioning"),
            remove=(
                lifecycle.TAG_REASON,
                lifecycle.TAG_RETRY,
                lifecycle.TAG_PENDING,
                lifecycle.TAG_PENDING_UNTIL,
            ),
            stack=stack,
        )
        if not op.gate_state:
            return
        state = op.gate_state
        if op.gate_type:
            collector.gate_types = (*collector.gate_types, op.gate_type)
        collector.on_gate = lambda: self.write_lifecycle(op, lifecycle.running_tags(state), stack=stack)
        collector.on_fabric = lambda: self.write_lifecycle(
            op, lifecycle.running_tags(lifecycle.VALIDATING_FABRIC), stack=stack
        )
        collector.on_ray_gate = lambda: self.write_lifecycle(
            op, lifecycle.running_tags(lifecycle.VALIDATING_KUBERAY), stack=stack
        )

    def settle(self, op: StackOp) -> None:
        """After a cluster stack's up, however it ended: the run's own outcome is in the outputs now, and
        they take precedence again."""
        self.write_lifecycle(op, {}, remove=(lifecycle.TAG_STATE,))
