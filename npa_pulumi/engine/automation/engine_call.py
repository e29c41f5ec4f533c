"""The engine call itself: one command on a selected stack, with the policy packs and their configs, the
engine's own trace, and on a DIY backend the lean path that spares the API's calls after the command.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.automation import diy_backend
from npa_pulumi.engine.automation.diy_backend import SECRET_PLACEHOLDER
from npa_pulumi.engine.automation.events import EventCollector
from npa_pulumi.engine.automation.stack_op import StackCommand, StackOp, change_counts
from npa_pulumi.engine.automation.stack_state import StackState
from npa_pulumi.output.results import StackResult
from npa_pulumi.output.stack_outputs import ClusterOutputs
from npa_pulumi.policies.catalog import FLEET_POLICY_NAMES
from npa_pulumi.runtime import tracing

if TYPE_CHECKING:
    from pulumi import automation as auto


def _user_policy_config(path: str | None) -> dict[str, Any] | None:
    """The user's --policy-config as a mapping ({} without one); None when it cannot be read as one (the
    engine is given the file as it is, and reports it)."""
    if not path:
        return {}
    try:
        config = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def _changed(changes: dict[str, int]) -> bool:
    return any(v for k, v in changes.items() if k != "same")


class EngineCall:
    """Runs one StackCommand on a stack the runner selected and turns the engine's answer into a result."""

    def __init__(
        self,
        state: StackState,
        policy_packs: list[str] | None = None,
        policy_configs: list[str] | None = None,
    ) -> None:
        self.state = state  # the outputs of the lean path come from the checkpoint
        self.policy_packs = policy_packs or []
        self.policy_configs = policy_configs or []

    def __call__(
        self,
        op: StackOp,
        stack: auto.Stack,
        command: StackCommand,
        collector: EventCollector,
        write_log: Callable[[str], None],
        **kwargs: Any,
    ) -> StackResult:
        with self._policy_configs(op) as configs, _engine_trace(op.stack, stack):
            if command == StackCommand.PREVIEW:
                return self._preview(op, stack, collector, write_log, configs, **kwargs)
            lean = self._lean(stack)
            if command == StackCommand.UP:
                return self._up(op, stack, collector, write_log, configs, lean, **kwargs)
            if command == StackCommand.DESTROY:
                return self._destroy(op, stack, collector, write_log, lean, **kwargs)
            if command == StackCommand.REFRESH:
                return self._refresh(op, stack, collector, write_log, lean, **kwargs)
        raise ValueError(f"unknown stack command {command!r}")

    @contextmanager
    def _policy_configs(self, op: StackOp) -> Iterator[list[str]]:
        """The config files paired with the packs for this run: the user's, or, when the op carries its own
        entries for the built-in pack (listed first), a temporary merge of both that is removed afterwards.
        Entries of the fleet-wide policies (the budget; npa-pulumi judges them, not CrossGuard, whose engine
        refuses a config for a policy no pack has) are left out of what the engine gets."""
        user_file = self.policy_configs[0] if self.policy_configs else None
        user = _user_policy_config(user_file)
        fleet_entries = user is not None and any(name in FLEET_POLICY_NAMES for name in user)
        if user is None or not self.policy_packs or not (op.policy_config or fleet_entries):
            yield self.policy_configs
            return
        user = {name: entry for name, entry in user.items() if name not in FLEET_POLICY_NAMES}
        merged = dict(user)
        for policy, entries in (op.policy_config or {}).items():
            given = user.get(policy) or {}
            # A policy's entry is a level ("mandatory") or an object with enforcementLevel and settings.
            given = {"enforcementLevel": given} if isinstance(given, str) else dict(given)
            merged[policy] = {**given, **entries}
        with tempfile.TemporaryDirectory(prefix="npa-policy-config-") as tmp:
            builtin = Path(tmp) / "builtin.json"
            builtin.write_text(json.dumps(merged), encoding="utf-8")
            others = Path(tmp) / "others.json"
            others.write_text(json.dumps(user), encoding="utf-8")
            # The engine pairs configs with packs by position and wants one per pack once any is given.
            yield [str(builtin), *([str(others)] * (len(self.policy_packs) - 1))]

    def _lean(self, stack: auto.Stack) -> bool:
        """On a DIY backend, spare the three engine invocations the Automation API makes after every
        up/destroy/refresh (`stack output` twice and `stack history`, about 1.5 s per stack): the change
        counts come from the engine's own summary event and the outputs from the checkpoint. Elsewhere
        the API's own calls are kept. (Pinned SDK: `Stack.up/destroy/refresh` call `self.outputs()` and
        `self.info()` after the command; these instance attributes shadow them for this one stack.)"""
        if diy_backend.stacks_dir(self.state.backend_url, self.state.project_name) is None:
            return False
        from pulumi import automation as auto

        def info(show_secrets: bool = False) -> auto.UpdateSummary:
            return auto.UpdateSummary(
                kind="update", start_time=datetime.now(), message="", environment={}, config={}, result=""
            )

        def outputs() -> dict[str, Any]:
            return {}

        setattr(stack, "info", info)  # noqa: B010
        setattr(stack, "outputs", outputs)  # noqa: B010
        return True

    @staticmethod
    def _changes(stack: auto.Stack, collector: EventCollector) -> dict[str, int]:
        if collector.summary is not None:
            return dict(collector.summary)
        from pulumi import automation as auto

        summary = auto.Stack.info(stack)  # no summary event arrived: ask the engine after all
        return change_counts(summary.resource_changes if summary else None)

    def _preview(
        self,
        op: StackOp,
        stack: auto.Stack,
        collector: EventCollector,
        write_log: Callable[[str], None],
        configs: list[str],
        **kwargs: Any,
    ) -> StackResult:
        preview = stack.preview(
            on_output=write_log,
            on_event=collector,
            policy_packs=self.policy_packs,
            policy_pack_configs=configs,
            **kwargs,
        )
        changes = change_counts(preview.change_summary)
        return op.result("changes" if _changed(changes) else "no-changes", changes=changes)

    def _up(
        self,
        op: StackOp,
        stack: auto.Stack,
        collector: EventCollector,
        write_log: Callable[[str], None],
        configs: list[str],
        lean: bool,
        **kwargs: Any,
    ) -> StackResult:
        up = stack.up(
            on_output=write_log,
            on_event=collector,
            policy_packs=self.policy_packs,
            policy_pack_configs=configs,
            **kwargs,
        )
        if lean:
            changes = self._changes(stack, collector)
            outputs = self.state.outputs(op) or {}
        else:
            changes = change_counts(up.summary.resource_changes)
            outputs = {
                name: (value.value if not value.secret else SECRET_PLACEHOLDER)
                for name, value in up.outputs.items()
            }
        return op.result(
            "deployed" if _changed(changes) else "unchanged",
            changes=changes,
            outputs=outputs,
            **ClusterOutputs.read(outputs).identity(),
        )

    @staticmethod
    def _destroy(
        op: StackOp,
        stack: auto.Stack,
        collector: EventCollector,
        write_log: Callable[[str], None],
        lean: bool,
        **kwargs: Any,
    ) -> StackResult:
        if lean:
            with _engine_flags(stack, "--remove"):
                stack.destroy(on_output=write_log, on_event=collector, **kwargs)
            # The stack is gone: its counts come from the engine's summary event or not at all.
            return op.result("destroyed", changes=change_counts(collector.summary))
        destroyed = stack.destroy(on_output=write_log, on_event=collector, **kwargs)
        stack.workspace.remove_stack(stack.name)
        return op.result("destroyed", changes=change_counts(destroyed.summary.resource_changes))

    def _refresh(
        self,
        op: StackOp,
        stack: auto.Stack,
        collector: EventCollector,
        write_log: Callable[[str], None],
        lean: bool,
        **kwargs: Any,
    ) -> StackResult:
        refreshed = stack.refresh(on_output=write_log, on_event=collector, **kwargs)
        changes = (
            self._changes(stack, collector) if lean else change_counts(refreshed.summary.resource_changes)
        )
        return op.result("drifted" if _changed(changes) else "in-sync", changes=changes)


@contextmanager
def _engine_flags(stack: auto.Stack, *flags: str) -> Iterator[None]:
    """Extra engine flags for the stack's next commands, through the Automation API's own hook for them
    (`Workspace.serialize_args_for_op`, which a LocalWorkspace leaves empty). `destroy --remove` removes
    the stack in the destroy's own engine process, as `stack rm` would (the same backend call: history and
    tags gone, the checkpoint kept as `.bak`, the stack's settings file deleted), sparing a second engine
    start. Only where the result needs nothing read back from the stack afterwards (`_lean`): the SDK
    reads the stack's history after a destroy, which a removed stack no longer has."""
    workspace = stack.workspace
    before = workspace.__dict__.get("serialize_args_for_op")  # another hook's flags (the trace's) are kept
    outer = workspace.serialize_args_for_op
    setattr(workspace, "serialize_args_for_op", lambda name: [*outer(name), *flags])  # noqa: B010
    try:
        yield
    finally:
        if before is None:
            delattr(workspace, "serialize_args_for_op")
        else:
            setattr(workspace, "serialize_args_for_op", before)  # noqa: B010


@contextmanager
def _engine_trace(stack_name: str, stack: auto.Stack) -> Iterator[None]:
    """When the command is traced (runtime/tracing.py): the engine's run starts with `TRACEPARENT` set to
    its stack's current span and `--otel-traces` into a private file, read back (scrubbed) afterwards, so
    the engine's own spans hang under the stack's. Nothing when tracing is off."""
    trace_file = tracing.engine_trace_file(stack_name)
    parent = tracing.traceparent(stack_name)
    if trace_file is None or parent is None:
        yield
        return
    workspace = stack.workspace
    env_vars = workspace.env_vars
    workspace.env_vars = {**env_vars, "TRACEPARENT": parent}
    with _engine_flags(stack, f"--otel-traces=file://{trace_file}"):
        try:
            yield
        finally:
            workspace.env_vars = env_vars
            tracing.collect_engine_trace(trace_file)
