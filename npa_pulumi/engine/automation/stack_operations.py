"""The runner: one Pulumi command on one stack, turned into a `StackResult`.

Every run selects (or creates) the stack with its inline program (selection.py), recovers a stale lock
left by a killed run (locks.py), sets the npa tags (tags.py) and the cluster's lifecycle records
(stack_state.py), runs the engine's command with the policy packs (engine_call.py) while its event stream
is collected (events.py), and reports itself on the progress view, the trace and a per-stack log
(run_report.py). The runner composes those parts; each holds one concern.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine import lifecycle
from npa_pulumi.engine.automation.engine_call import EngineCall
from npa_pulumi.engine.automation.events import EventCollector, missing_plugin_hint, plain_text
from npa_pulumi.engine.automation.locks import LockRecovery, StackLocked, locked_by_engine_message
from npa_pulumi.engine.automation.run_report import RunReport
from npa_pulumi.engine.automation.selection import StackSelector
from npa_pulumi.engine.automation.stack_op import StackCommand, StackOp
from npa_pulumi.engine.automation.stack_state import StackState
from npa_pulumi.engine.automation.tags import StackTags
from npa_pulumi.engine.automation.workspace import PROJECT_NAME, EngineSettings
from npa_pulumi.output.progress import Progress
from npa_pulumi.output.results import StackResult

if TYPE_CHECKING:
    from pulumi import automation as auto

    from npa_pulumi.engine.automation.provider_host import SharedProviderHost


class StackExecutor:
    """Runs StackCommands on one backend's stacks for one fleet command, and reads what they recorded."""

    def __init__(
        self,
        settings: EngineSettings,
        progress: Progress,
        log_dir: Path,
        policy_packs: list[str] | None = None,
        policy_configs: list[str] | None = None,
        project_name: str = PROJECT_NAME,
        break_lock: bool = False,
        provider_host: SharedProviderHost | None = None,
    ) -> None:
        self.settings = settings
        # The command's one dynamic-provider host, which every engine run attaches to (None: each engine
        # run starts its own, as Pulumi does by default).
        self.provider_host = provider_host
        self.progress = progress
        self.log_dir = log_dir
        self.project_name = project_name
        self.locks = LockRecovery(settings.backend_url, project_name, break_lock, progress)
        self.selector = StackSelector(settings, project_name, self.locks)
        self.tags = StackTags(
            settings.backend_url, project_name, lambda op: self.selector.select(op, create=False)
        )
        self.state = StackState(self.selector, self.tags)
        self.engine = EngineCall(self.state, policy_packs, policy_configs)

    @property
    def policy_packs(self) -> list[str]:
        return self.engine.policy_packs

    # ----------------------------------------------------------------------------- running

    def run(self, op: StackOp, command: StackCommand, **kwargs: Any) -> StackResult:
        """Run `command` on the op's stack (`kwargs` go to the Automation API's call, e.g. refresh=True)."""
        from pulumi import automation as auto

        report = RunReport(self.progress, op, command, self.log_dir)
        if self.provider_host is not None:
            self.settings.extra_env.update(self.provider_host.attach_env())
        collector = EventCollector(op.stack, self.progress)
        recording = command == StackCommand.UP and op.kind == "cluster"
        try:
            stack = self.selector.select(op, create=command.creates_stack)
            if stack is None:
                return report.absent()
            self.locks.before_run(stack)
            try:
                result = self._tag_and_invoke(op, stack, command, collector, report, **kwargs)
            except auto.ConcurrentUpdateError as err:
                if not self.locks.after_refusal(stack, str(err)):
                    raise
                result = self._tag_and_invoke(op, stack, command, collector, report, **kwargs)
        except StackLocked as err:
            return report.locked(str(err))
        except auto.ConcurrentUpdateError as err:
            # The engine named no holder npa-pulumi can judge: say what it did say (its lock lines).
            return report.locked(locked_by_engine_message(op.stack, str(err)))
        except auto.CommandError as err:
            message = missing_plugin_hint("; ".join(collector.errors) or plain_text(str(err))[-2000:])
            return report.failed(message, collector)
        finally:
            report.log.close()
            if recording:
                self.state.settle(op)
        return report.finished(result, collector)

    def _tag_and_invoke(
        self,
        op: StackOp,
        stack: auto.Stack,
        command: StackCommand,
        collector: EventCollector,
        report: RunReport,
        **kwargs: Any,
    ) -> StackResult:
        if command.creates_stack:
            self.tags.label(op, stack, created=op.stack in self.selector.created)
        if command == StackCommand.UP and op.kind == "cluster":
            self.state.watch_up(op, stack, collector)
        report.phase(command.verb)
        return self.engine(op, stack, command, collector, report.log, **kwargs)

    # ----------------------------------------------------------------------------- the stacks' records

    def select(self, op: StackOp, create: bool) -> auto.Stack | None:
        return self.selector.select(op, create)

    def exists(self, stack_name: str) -> bool:
        return self.selector.exists(stack_name)

    def outputs(self, op: StackOp) -> dict[str, Any] | None:
        return self.state.outputs(op)

    def last_update_failed(self, op: StackOp) -> bool:
        return self.state.last_update_failed(op)

    def resource_output(self, op: StackOp, resource_type: str, name: str) -> Any:
        return self.state.resource_output(op, resource_type, name)

    def read_tags(self, op: StackOp) -> dict[str, str] | None:
        return self.tags.read(op)

    def write_lifecycle(
        self,
        op: StackOp,
        tags: dict[str, str],
        remove: tuple[str, ...] = (),
        stack: auto.Stack | None = None,
    ) -> None:
        self.state.write_lifecycle(op, tags, remove, stack)

    def recorded_lifecycle(self, op: StackOp) -> lifecycle.Recorded | None:
        return self.state.recorded_lifecycle(op)
