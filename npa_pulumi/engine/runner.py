"""Running one Pulumi operation on one stack, and turning what the engine said into a `StackResult`.

Every operation: selects (or creates) the stack with its inline program, sets the npa tags, recovers a
stale lock left by a killed run, streams the engine's output into a private per-stack log file, feeds the
live progress view, and collects resource diffs and policy violations from the engine's event stream.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.progress import Progress
from npa_pulumi.engine.results import PolicyViolation, StackKind, StackResult
from npa_pulumi.engine.stacks import (
    StackLocked,
    clear_pending_operations,
    clear_stale_lock,
    ensure_tags,
    recovery_command,
)
from npa_pulumi.engine.workspace import PROJECT_NAME, EngineSettings, workspace_options

if TYPE_CHECKING:
    from pulumi import automation as auto

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_COLOR_TAGS = re.compile(r"<\{%[^%]*%\}>")


def _plain(text: str) -> str:
    return _COLOR_TAGS.sub("", _ANSI.sub("", text)).strip()


@dataclass
class StackOp:
    """One stack and what to run for it."""

    stack: str
    kind: StackKind
    project_key: str
    cluster_name: str | None
    program: Callable[[], None] | None
    tags: dict[str, str]

    def result(self, status: str, **fields: Any) -> StackResult:
        return StackResult(
            stack=self.stack,
            kind=self.kind,
            project_key=self.project_key,
            cluster_name=self.cluster_name,
            status=status,
            **fields,
        )


@dataclass
class EventCollector:
    """Counts, diffs, policy results and error diagnostics from the engine's event stream."""

    stack: str
    progress: Progress
    diff: list[dict[str, Any]] = field(default_factory=list)
    policy: list[PolicyViolation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __call__(self, event: auto.EngineEvent) -> None:
        if event.resource_pre_event is not None:
            meta = event.resource_pre_event.metadata
            op = str(getattr(meta.op, "value", meta.op))
            if meta.type != "pulumi:pulumi:Stack":
                self.progress.resource_event(self.stack, finished=False)
                if op not in ("same", "read"):
                    self.diff.append(
                        {"urn": meta.urn, "type": meta.type, "op": op, "diffs": list(meta.diffs or [])}
                    )
        elif event.res_outputs_event is not None:
            if event.res_outputs_event.metadata.type != "pulumi:pulumi:Stack":
                self.progress.resource_event(self.stack, finished=True)
        elif event.policy_event is not None:
            pe = event.policy_event
            self.policy.append(
                PolicyViolation(
                    policy=pe.policy_name,
                    pack=pe.policy_pack_name,
                    level=str(pe.enforcement_level).lower(),
                    message=_plain(pe.message),
                    resource=pe.resource_urn or "",
                )
            )
        elif event.diagnostic_event is not None:
            diag = event.diagnostic_event
            if diag.severity == "error":
                text = _plain(diag.message)
                if text and text not in self.errors:
                    self.errors.append(text)


class _StackLog:
    """A private (0600) per-stack log file the engine's output is streamed into."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle = path.open("a")
        path.chmod(0o600)

    def __call__(self, line: str) -> None:
        self._handle.write(line if line.endswith("\n") else line + "\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


class StackExecutor:
    def __init__(
        self,
        settings: EngineSettings,
        progress: Progress,
        log_dir: Path,
        policy_packs: list[str] | None = None,
        policy_configs: list[str] | None = None,
        project_name: str = PROJECT_NAME,
    ) -> None:
        self.settings = settings
        self.progress = progress
        self.log_dir = log_dir
        self.policy_packs = policy_packs or []
        self.policy_configs = policy_configs or []
        self.project_name = project_name

    # ----------------------------------------------------------------------------- stack access

    def select(self, op: StackOp, create: bool) -> auto.Stack | None:
        from pulumi import automation as auto

        opts = workspace_options(self.settings, op.program, self.project_name)
        try:
            if create:
                stack = auto.create_or_select_stack(
                    op.stack, project_name=self.project_name, program=op.program, opts=opts
                )
            else:
                stack = auto.select_stack(
                    op.stack, project_name=self.project_name, program=op.program, opts=opts
                )
        except auto.StackNotFoundError:
            return None
        return stack

    def exists(self, stack_name: str) -> bool:
        return self.select(StackOp(stack_name, "project", "", None, None, {}), create=False) is not None

    def outputs(self, op: StackOp) -> dict[str, Any] | None:
        stack = self.select(op, create=False)
        if stack is None:
            return None
        return {name: value.value for name, value in stack.outputs().items()}

    def _prepare(self, stack: auto.Stack) -> None:
        note = clear_stale_lock(stack, self.settings.backend_url)
        if note is not None:
            cleared = clear_pending_operations(stack)
            if cleared:
                note += f"; cleared {len(cleared)} pending operation(s) (their creates are idempotent)"
            self.progress.message(f"{stack.name}: recovered from an interrupted run: {note}")

    def _log(self, op: StackOp, command: str) -> _StackLog:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = _StackLog(self.log_dir / f"{op.stack}.{command}.log")
        log(f"===== {time.strftime('%Y-%m-%dT%H:%M:%S')} {command} {op.stack}")
        return log

    # ----------------------------------------------------------------------------- operations

    def run(self, op: StackOp, command: str, **kwargs: Any) -> StackResult:
        """`command` is one of up | preview | destroy | refresh."""
        from pulumi import automation as auto

        started = time.monotonic()
        self.progress.phase(
            op.stack,
            {"up": "updating", "preview": "previewing", "destroy": "destroying", "refresh": "refreshing"}[
                command
            ],
        )
        write_log = self._log(op, command)
        log_path = write_log.path
        collector = EventCollector(op.stack, self.progress)
        try:
            stack = self.select(op, create=command in ("up", "preview"))
            if stack is None:
                self.progress.phase(op.stack, "absent")
                return op.result("absent", elapsed_s=time.monotonic() - started)
            if command in ("up", "preview"):
                ensure_tags(stack, op.tags)
            self._prepare(stack)
            result = self._invoke(op, stack, command, collector, write_log, **kwargs)
        except StackLocked as err:
            self.progress.phase(op.stack, "failed", "locked")
            return op.result(
                "failed", error=str(err), elapsed_s=time.monotonic() - started, log_file=str(log_path)
            )
        except auto.ConcurrentUpdateError:
            self.progress.phase(op.stack, "failed", "locked")
            return op.result(
                "failed",
                error=f"stack {op.stack} is locked by another update; if no other run is "
                f"active: {recovery_command(op.stack)}",
                elapsed_s=time.monotonic() - started,
                log_file=str(log_path),
            )
        except auto.CommandError as err:
            message = "; ".join(collector.errors) or _plain(str(err))[-2000:]
            self.progress.phase(op.stack, "failed")
            return op.result(
                "failed",
                error=message,
                diff=collector.diff,
                policy=collector.policy,
                elapsed_s=time.monotonic() - started,
                log_file=str(log_path),
            )
        finally:
            write_log.close()
        result.diff = collector.diff
        result.policy = collector.policy
        result.elapsed_s = time.monotonic() - started
        result.log_file = str(log_path)
        self.progress.phase(op.stack, "done" if result.status != "unchanged" else "unchanged")
        return result

    def _invoke(
        self,
        op: StackOp,
        stack: auto.Stack,
        command: str,
        collector: EventCollector,
        write_log: Callable[[str], None],
        **kwargs: Any,
    ) -> StackResult:
        packs, configs = self.policy_packs, self.policy_configs
        if command == "preview":
            preview = stack.preview(
                on_output=write_log,
                on_event=collector,
                policy_packs=packs,
                policy_pack_configs=configs,
                **kwargs,
            )
            changes = {k: int(v) for k, v in preview.change_summary.items()}
            changed = any(v for k, v in changes.items() if k != "same")
            return op.result("changes" if changed else "no-changes", changes=changes)
        if command == "up":
            up = stack.up(
                on_output=write_log,
                on_event=collector,
                policy_packs=packs,
                policy_pack_configs=configs,
                **kwargs,
            )
            changes = {k: int(v) for k, v in (up.summary.resource_changes or {}).items()}
            changed = any(v for k, v in changes.items() if k != "same")
            outputs = {
                name: (value.value if not value.secret else "[secret]") for name, value in up.outputs.items()
            }
            return op.result(
                "deployed" if changed else "unchanged",
                changes=changes,
                outputs=outputs,
                project_id=outputs.get("project_id"),
                cluster_id=outputs.get("cluster_id"),
                kube_context=outputs.get("kube_context"),
            )
        if command == "destroy":
            destroyed = stack.destroy(on_output=write_log, on_event=collector, **kwargs)
            changes = {k: int(v) for k, v in (destroyed.summary.resource_changes or {}).items()}
            stack.workspace.remove_stack(stack.name)
            return op.result("destroyed", changes=changes)
        if command == "refresh":
            refreshed = stack.refresh(on_output=write_log, on_event=collector, **kwargs)
            changes = {k: int(v) for k, v in (refreshed.summary.resource_changes or {}).items()}
            drifted = any(v for k, v in changes.items() if k != "same")
            return op.result("drifted" if drifted else "in-sync", changes=changes)
        raise ValueError(f"unknown stack command {command!r}")
