"""One stack run's account of itself: the live progress view's phases, the stack's trace attributes, the
private per-stack log the engine's output is streamed into, and the elapsed time every result carries."""

from __future__ import annotations

import time
from pathlib import Path

from npa_pulumi.engine.automation.events import EventCollector
from npa_pulumi.engine.automation.stack_op import StackCommand, StackOp
from npa_pulumi.output.progress import Progress, headline
from npa_pulumi.output.results import StackResult
from npa_pulumi.runtime import tracing


class StackLog:
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


class RunReport:
    """Opened when a run starts (phase `preparing`, the trace's attributes, the log); each way the run
    can end shows its phase and stamps its result."""

    def __init__(self, progress: Progress, op: StackOp, command: StackCommand, log_dir: Path) -> None:
        self.progress = progress
        self.op = op
        self.command = command
        self.started = time.monotonic()
        progress.phase(op.stack, "preparing")
        tracing.stack_attributes(
            op.stack,
            {
                "npa.command": command.value,
                "npa.kind": op.kind,
                "npa.project": op.project_key,
                "npa.cluster": op.cluster_name,
                "npa.backend": op.backend,
            },
        )
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log = StackLog(log_dir / f"{op.stack}.{command.value}.log")
        self.log(f"===== {time.strftime('%Y-%m-%dT%H:%M:%S')} {command.value} {op.stack}")

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def phase(self, phase: str, note: str = "") -> None:
        self.progress.phase(self.op.stack, phase, note)

    def absent(self) -> StackResult:
        """No such stack (destroy, refresh): nothing ran."""
        self.phase("absent")
        return self.op.result("absent", elapsed_s=self.elapsed())

    def locked(self, error: str) -> StackResult:
        """Another run holds the stack's lock (or one the engine named and npa-pulumi could not judge)."""
        self.phase("failed", "locked")
        return self.op.result(
            "failed", error=error, elapsed_s=self.elapsed(), log_file=str(self.log.path), locked=True
        )

    def failed(self, message: str, collector: EventCollector) -> StackResult:
        """The engine's command failed: its message, and what it had done and judged until then."""
        self.phase("failed", headline(message))
        return self.op.result(
            "failed",
            error=message,
            diff=collector.sorted_diff(),
            policy=collector.policy,
            elapsed_s=self.elapsed(),
            log_file=str(self.log.path),
        )

    def finished(self, result: StackResult, collector: EventCollector) -> StackResult:
        """The engine's command succeeded: the result with its diff, policy results, time and log."""
        result.diff = collector.sorted_diff()
        result.policy = collector.policy
        result.elapsed_s = self.elapsed()
        result.log_file = str(self.log.path)
        tracing.stack_attributes(
            self.op.stack,
            {
                "npa.result": result.status,
                "npa.policy.violations": len(result.policy),
                **{f"npa.changes.{kind}": count for kind, count in (result.changes or {}).items()},
            },
        )
        self.phase("done" if result.status != "unchanged" else "unchanged")
        return result
