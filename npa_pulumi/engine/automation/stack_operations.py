"""Running one Pulumi operation on one stack, and turning what the engine said into a `StackResult`.

Every operation: selects (or creates) the stack with its inline program, sets the npa tags, recovers a
stale lock left by a killed run, streams the engine's output into a private per-stack log file, feeds the
live progress view, and collects resource diffs and policy violations from the engine's event stream.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from npa_pulumi.engine import lifecycle
from npa_pulumi.engine.automation import diy_backend
from npa_pulumi.engine.automation.diy_backend import NO_FAST_PATH, SECRET_PLACEHOLDER, checkpoint_outputs
from npa_pulumi.engine.automation.stacks import (
    StackLocked,
    clear_creation_lock,
    clear_pending_operations,
    clear_stale_lock,
    engine_said,
    ensure_tags,
    recover_engine_lock,
    recovery_command,
)
from npa_pulumi.engine.automation.workspace import PASSPHRASE, PROJECT_NAME, EngineSettings, workspace_options
from npa_pulumi.engine.progress import Progress, headline
from npa_pulumi.engine.provider_host import SharedProviderHost
from npa_pulumi.output.results import PolicyViolation, StackKind, StackResult
from npa_pulumi.output.stack_outputs import ClusterOutputs
from npa_pulumi.policies.catalog import FLEET_POLICY_NAMES
from npa_pulumi.runtime import tracing

if TYPE_CHECKING:
    from pulumi import automation as auto

log = logging.getLogger(__name__)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_COLOR_TAGS = re.compile(r"<\{%[^%]*%\}>")


CHANGE_KINDS = ("create", "update", "replace", "delete", "same")


def change_counts(changes: Mapping[Any, Any] | None) -> dict[str, int]:
    """Resource-change counts keyed by plain operation names, every standard kind present (0 when
    absent) so JSON readers can rely on `changes.create` etc."""
    raw = {str(getattr(k, "value", k)): int(v) for k, v in (changes or {}).items()}
    return {**{kind: raw.pop(kind, 0) for kind in CHANGE_KINDS}, **raw}


# The engine's marker for a secret value in an exported deployment.
_SECRET_SIG = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")


def _plain_secret(value: Any) -> Any:
    """An exported output's value: a decrypted secret arrives as {sig, plaintext: JSON text}."""
    if isinstance(value, dict) and value.get(_SECRET_SIG[0]) == _SECRET_SIG[1]:
        plaintext = value.get("plaintext")
        return json.loads(plaintext) if isinstance(plaintext, str) else None
    return value


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
    # False when the stack is known to have been deployed by npa-pulumi (and so tagged) before: setting
    # tags costs a CLI round trip per tag.
    tags_needed: bool = True
    # Entries for the built-in policy pack's config, for this stack's run only, merged over the user's
    # `--policy-config` per policy (e.g. the node groups Terraform's plan replaces). Not secret.
    policy_config: dict[str, dict[str, Any]] | None = None
    # A cluster stack with a health gate: the lifecycle state recorded while the gate's step runs
    # (engine/lifecycle.py); "" when it has none.
    gate_state: str = ""
    backend: str | None = None  # a cluster stack's backend (spec.constants.BackendKind), in its result
    # A cluster stack's project stack: a new stack is made with that stack's passphrase salt, so that its
    # engine runs, which open both stacks (the StackReference), derive the passphrase's key once, not twice
    # (`StackExecutor._key_shared`). None: a salt of its own.
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
            if self.on_gate is not None and meta.type.endswith(GATE_TYPE_SUFFIXES) and op in _RUNS:
                self.on_gate()
            if self.on_fabric is not None and meta.type.endswith(FABRIC_TYPE_SUFFIX) and op in _RUNS:
                self.on_fabric()
            if self.on_ray_gate is not None and meta.type.endswith(RAY_GATE_TYPE_SUFFIX) and op in _RUNS:
                self.on_ray_gate()
            if op in _RUNS and meta.type.endswith(TRACED_TYPE_SUFFIXES):
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
                    message=_plain(pe.message),
                    resource=pe.resource_urn or "",
                )
            )
        elif event.diagnostic_event is not None:
            diag = event.diagnostic_event
            if diag.severity == "error":
                # The dynamic-provider host wraps every provider exception in this gRPC phrase.
                text = _plain(diag.message).removeprefix("Exception calling application: ")
                if text and text not in self.errors:
                    self.errors.append(text)


GATE_TYPE_SUFFIX = ":GpuHealthGate"  # components/gpu_health.py's dynamic resource type
FABRIC_TYPE_SUFFIX = ":GpuFabricCheck"  # components/gpu_fabric.py's
RAY_GATE_TYPE_SUFFIX = ":KubeRayGate"  # components/kuberay_gate.py's
# ... and components/slurm_gate.py's (Slurm clusters): either one starting is the gate's step.
GATE_TYPE_SUFFIXES = (GATE_TYPE_SUFFIX, ":SlurmGate")
_RUNS = ("create", "update", "replace", "create-replacement")  # the steps that run a provider's code
# The steps a trace shows as spans of their own inside the engine's run (runtime/tracing.py).
TRACED_TYPE_SUFFIXES = (*GATE_TYPE_SUFFIXES, FABRIC_TYPE_SUFFIX, RAY_GATE_TYPE_SUFFIX, ":TerraformModule")


def _read_only_program() -> None:
    raise RuntimeError("a stack selected only to be read was asked to run its program")


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
        break_lock: bool = False,
        provider_host: SharedProviderHost | None = None,
    ) -> None:
        self.settings = settings
        # The command's one dynamic-provider host, which every engine run attaches to (None: each engine
        # run starts its own, as Pulumi does by default).
        self.provider_host = provider_host
        self.break_lock = break_lock  # `--break-lock`: take over a lock another machine holds
        self.progress = progress
        self.log_dir = log_dir
        self.policy_packs = policy_packs or []
        self.policy_configs = policy_configs or []
        self.project_name = project_name
        self._created: set[str] = set()  # stacks this executor created (they carry no tags yet)
        self._creation_locks: dict[str, threading.Lock] = {}  # one `stack init` per new stack at a time
        self._creation_locks_lock = threading.Lock()
        self._known_tags: dict[str, dict[str, str]] = {}  # lifecycle writes on non-DIY backends

    # ----------------------------------------------------------------------------- stack access

    def select(self, op: StackOp, create: bool) -> auto.Stack | None:
        from pulumi import automation as auto

        # Reading a stack (outputs, history) needs no program, but the Automation API only selects an inline
        # stack with one; on a file:// or s3:// backend the checkpoint usually answers first.
        program = op.program or _read_only_program
        opts = workspace_options(self.settings, program, self.project_name)
        # On a file:// or s3:// backend the checkpoint says whether the stack exists (a dict; absent: None).
        checkpoint = checkpoint_outputs(self.settings.backend_url, op.stack, self.project_name)
        if isinstance(checkpoint, dict):
            return self._select_known(op.stack, opts)
        try:
            if create and checkpoint is None:
                with self._creation_lock(op.stack):
                    # Another thread of this command (the project stack a cluster stack shares a key
                    # with, a stack created ahead of its run) may have made it while this one waited.
                    if isinstance(
                        checkpoint_outputs(self.settings.backend_url, op.stack, self.project_name), dict
                    ):
                        return self._select_known(op.stack, opts)
                    # `create_or_select` tries `stack select` first, one engine start (~0.3 s of CPU)
                    # wasted on every new stack; the DIY checkpoint says the stack is not there.
                    try:
                        key_shared = self._key_shared(op, opts)
                        stack = self._create(
                            op.stack,
                            lambda: auto.create_stack(
                                op.stack, project_name=self.project_name, program=program, opts=key_shared
                            ),
                        )
                        self._created.add(op.stack)
                        return stack
                    except auto.StackAlreadyExistsError:  # another process made it meanwhile
                        opts = workspace_options(self.settings, program, self.project_name)
            if create:
                try:
                    stack = self._create(
                        op.stack,
                        lambda: auto.create_or_select_stack(
                            op.stack, project_name=self.project_name, program=program, opts=opts
                        ),
                    )
                except auto.StackAlreadyExistsError:
                    # Made by another run (another shard, another machine) between select and create.
                    stack = auto.select_stack(
                        op.stack,
                        project_name=self.project_name,
                        program=program,
                        opts=workspace_options(self.settings, program, self.project_name),
                    )
            else:
                stack = auto.select_stack(
                    op.stack, project_name=self.project_name, program=program, opts=opts
                )
        except auto.StackNotFoundError:
            return None
        return stack

    def _create(self, stack_name: str, create: Callable[[], auto.Stack]) -> auto.Stack:
        """`create()`, recovering once from the lock a run killed while it created this stack left
        behind (the engine locks a stack it creates; `_prepare` can only clear the locks of existing
        stacks)."""
        from pulumi import automation as auto

        try:
            return create()
        except auto.ConcurrentUpdateError as err:
            note = clear_creation_lock(
                self.settings.backend_url, self.project_name, stack_name, _plain(str(err)), self.break_lock
            )
            self.progress.message(f"{stack_name}: recovered from an interrupted run: {note}")
            return create()

    def _creation_lock(self, stack_name: str) -> threading.Lock:
        with self._creation_locks_lock:
            return self._creation_locks.setdefault(stack_name, threading.Lock())

    def _key_shared(self, op: StackOp, opts: auto.LocalWorkspaceOptions) -> auto.LocalWorkspaceOptions:
        """`opts` for creating `op.stack` with the passphrase salt of `op.key_shared_with` (a cluster
        stack's project stack, created first when it is new).

        The engine derives a passphrase's key (1,000,000 PBKDF2 rounds, ~0.25 s of CPU) once per salt per
        process (pkg/secrets/passphrase: its secrets managers are cached by their state, the salt). Every
        engine run of a cluster stack opens its project stack too (the StackReference to its outputs), so
        with a salt of its own each run derived two keys; with its project's salt, one. The salt is not
        secret (it is in every checkpoint); one passphrase protecting several stacks with one salt gives an
        attacker nothing the passphrase itself would not. The stack's settings file carries the salt into
        `stack init` (the Automation API's `stack_settings`), which keeps a salt it finds there. Other
        secrets providers (a key service) derive nothing: unchanged."""
        if op.key_shared_with is None or self.settings.secrets_provider != PASSPHRASE:
            return opts
        from pulumi import automation as auto

        url, partner = self.settings.backend_url, op.key_shared_with
        salt = diy_backend.passphrase_salt(url, partner, self.project_name)
        if salt is None and checkpoint_outputs(url, partner, self.project_name) is None:
            # The project stack is new too: made first (its own run then finds it), to share its salt.
            self.select(StackOp(partner, "project", op.project_key, None, None, {}), create=True)
            salt = diy_backend.passphrase_salt(url, partner, self.project_name)
        if salt is None:  # not a DIY backend, or the partner's stack has no passphrase salt
            return opts
        opts.stack_settings = {op.stack: auto.StackSettings(encryption_salt=salt)}
        return opts

    @staticmethod
    def _select_known(stack_name: str, opts: auto.LocalWorkspaceOptions) -> auto.Stack:
        """A Stack object for a stack the checkpoint shows, without `pulumi stack select`: that engine
        start (~0.4 s) would only confirm what the file says, and every command the Automation API runs
        names the stack with `--stack` anyway. (Pinned SDK: `Stack.select` calls
        `workspace.select_stack`; the instance attribute shadows it for this one call. Our work dir always
        holds the Pulumi.yaml `ensure_project_file` wrote, as `auto.select_stack` would check.)"""
        from pulumi import automation as auto

        workspace = auto.LocalWorkspace(**opts.__dict__)
        setattr(workspace, "select_stack", lambda _name: None)  # noqa: B010
        try:
            return auto.Stack.select(stack_name, workspace)
        finally:
            delattr(workspace, "select_stack")

    def exists(self, stack_name: str) -> bool:
        return self.select(StackOp(stack_name, "project", "", None, None, {}), create=False) is not None

    def outputs(self, op: StackOp) -> dict[str, Any] | None:
        """The stack's outputs (None when it does not exist); secret values read as `[secret]`."""
        fast = checkpoint_outputs(self.settings.backend_url, op.stack, self.project_name)
        if fast is not NO_FAST_PATH:
            return cast("dict[str, Any] | None", fast)
        stack = self.select(op, create=False)
        if stack is None:
            return None
        return {
            name: (SECRET_PLACEHOLDER if value.secret else value.value)
            for name, value in stack.outputs().items()
        }

    def last_update_failed(self, op: StackOp) -> bool:
        """Whether the stack's newest update failed (False when it has none, or there is no stack)."""
        result = diy_backend.last_update_result(self.settings.backend_url, op.stack, self.project_name)
        if result is NO_FAST_PATH:
            stack = self.select(op, create=False)
            history = stack.history(page_size=1) if stack is not None else []
            result = history[0].result if history else None
        return bool(result == "failed")

    def resource_output(self, op: StackOp, resource_type: str, name: str) -> Any:
        """One output of the stack's first resource of `resource_type`, secrets decrypted (the engine's
        `stack export --show-secrets`); None when the stack, the resource or the output is absent. For the
        callers that need a secret value back (Terraform's state for a preview's plan), never for display."""
        stack = self.select(op, create=False)
        if stack is None:
            return None
        deployment = stack.export_stack().deployment or {}
        for resource in deployment.get("resources") or []:
            if resource.get("type") == resource_type:
                return _plain_secret((resource.get("outputs") or {}).get(name))
        return None

    def _prepare(self, stack: auto.Stack) -> None:
        note = clear_stale_lock(stack, self.settings.backend_url, self.project_name, self.break_lock)
        if note is not None:
            self._recovered(stack, note)

    def _recovered(self, stack: auto.Stack, note: str) -> None:
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
        self.progress.phase(op.stack, "preparing")
        tracing.stack_attributes(
            op.stack,
            {
                "npa.command": command,
                "npa.kind": op.kind,
                "npa.project": op.project_key,
                "npa.cluster": op.cluster_name,
                "npa.backend": op.backend,
            },
        )
        if self.provider_host is not None:
            self.settings.extra_env.update(self.provider_host.attach_env())
        write_log = self._log(op, command)
        log_path = write_log.path
        collector = EventCollector(op.stack, self.progress)
        recording = command == "up" and op.kind == "cluster"
        try:
            stack = self.select(op, create=command in ("up", "preview"))
            if stack is None:
                self.progress.phase(op.stack, "absent")
                return op.result("absent", elapsed_s=time.monotonic() - started)
            # Locks first: setting a tag on a stack another process holds fails with the engine's
            # generic "locked" error, before a stale lock could be recovered or a live one named.
            self._prepare(stack)
            try:
                result = self._tag_and_invoke(op, stack, command, collector, write_log, **kwargs)
            except auto.ConcurrentUpdateError as err:
                # Only the engine can read a lock on a backend other than file://: it names the holder.
                note = recover_engine_lock(stack, str(err), self.break_lock)
                if note is None:
                    raise
                self._recovered(stack, note)
                result = self._tag_and_invoke(op, stack, command, collector, write_log, **kwargs)
        except StackLocked as err:
            self.progress.phase(op.stack, "failed", "locked")
            return op.result(
                "failed",
                error=str(err),
                elapsed_s=time.monotonic() - started,
                log_file=str(log_path),
                locked=True,
            )
        except auto.ConcurrentUpdateError as err:
            self.progress.phase(op.stack, "failed", "locked")
            # The engine named no holder npa-pulumi can judge: say what it did say (its lock lines).
            said = engine_said(_plain(str(err)))
            return op.result(
                "failed",
                error=f"stack {op.stack} is locked by another update; if no other run is "
                f"active: {recovery_command(op.stack)} (the engine said: {said})",
                elapsed_s=time.monotonic() - started,
                log_file=str(log_path),
                locked=True,
            )
        except auto.CommandError as err:
            message = missing_plugin_hint("; ".join(collector.errors) or _plain(str(err))[-2000:])
            self.progress.phase(op.stack, "failed", headline(message))
            return op.result(
                "failed",
                error=message,
                diff=collector.sorted_diff(),
                policy=collector.policy,
                elapsed_s=time.monotonic() - started,
                log_file=str(log_path),
            )
        finally:
            write_log.close()
            if recording:
                # The run's own outcome is in the outputs now: they take precedence again.
                self.write_lifecycle(op, {}, remove=(lifecycle.TAG_STATE,))
        result.diff = collector.sorted_diff()
        result.policy = collector.policy
        result.elapsed_s = time.monotonic() - started
        result.log_file = str(log_path)
        tracing.stack_attributes(
            op.stack,
            {
                "npa.result": result.status,
                "npa.policy.violations": len(result.policy),
                **{f"npa.changes.{kind}": count for kind, count in (result.changes or {}).items()},
            },
        )
        self.progress.phase(op.stack, "done" if result.status != "unchanged" else "unchanged")
        return result

    def _tag_and_invoke(
        self,
        op: StackOp,
        stack: auto.Stack,
        command: str,
        collector: EventCollector,
        write_log: Callable[[str], None],
        **kwargs: Any,
    ) -> StackResult:
        if (
            command in ("up", "preview")
            and op.tags_needed
            and not diy_backend.write_tags(self.settings.backend_url, self.project_name, op.stack, op.tags)
        ):
            # A stack made just now has no tags: set them without listing them first.
            ensure_tags(stack, op.tags, current={} if op.stack in self._created else None)
        if command == "up" and op.kind == "cluster":
            # Its infrastructure applies first; an earlier destroy-incomplete no longer holds.
            self.write_lifecycle(
                op,
                lifecycle.running_tags("provisioning"),
                remove=(lifecycle.TAG_REASON, lifecycle.TAG_RETRY),
                stack=stack,
            )
            if op.gate_state:
                state = op.gate_state
                collector.on_gate = lambda: self.write_lifecycle(
                    op, lifecycle.running_tags(state), stack=stack
                )
                collector.on_fabric = lambda: self.write_lifecycle(
                    op, lifecycle.running_tags(lifecycle.VALIDATING_FABRIC), stack=stack
                )
                collector.on_ray_gate = lambda: self.write_lifecycle(
                    op, lifecycle.running_tags(lifecycle.VALIDATING_KUBERAY), stack=stack
                )
        verb = {
            "up": "updating",
            "preview": "previewing",
            "destroy": "destroying",
            "refresh": "refreshing",
        }
        self.progress.phase(op.stack, verb[command])
        return self._invoke(op, stack, command, collector, write_log, **kwargs)

    # ----------------------------------------------------------------------------- lifecycle

    def write_lifecycle(
        self,
        op: StackOp,
        tags: dict[str, str],
        remove: tuple[str, ...] = (),
        stack: auto.Stack | None = None,
    ) -> None:
        """Record lifecycle tags beside the stack (engine/lifecycle.py). Best effort: a record that cannot
        be written leaves `status` with the outputs, it never fails the run."""
        if diy_backend.write_tags(self.settings.backend_url, self.project_name, op.stack, tags, remove):
            return
        # Elsewhere every tag call is an engine start: list once per stack, then change only what differs.
        try:
            stack = stack or self.select(op, create=False)
            if stack is None:
                return
            current = self._known_tags.get(op.stack)
            if current is None:
                current = self._known_tags[op.stack] = dict(stack.list_tags())
            for name, value in tags.items():
                if current.get(name) != value:
                    stack.set_tag(name, value)
                    current[name] = value
            for name in remove:
                if name in current:
                    stack.remove_tag(name)
                    del current[name]
        except Exception as err:  # the engine refused (a backend without tags): status falls back
            self._known_tags.pop(op.stack, None)
            log.warning("could not record the lifecycle of %s: %s", op.stack, err)

    def read_tags(self, op: StackOp) -> dict[str, str] | None:
        """The tags recorded beside the stack (None: no stack, or none could be read)."""
        tags = diy_backend.read_tags(self.settings.backend_url, self.project_name, op.stack)
        if tags is NO_FAST_PATH:
            try:
                stack = self.select(op, create=False)
                tags = dict(stack.list_tags()) if stack is not None else None
            except Exception as err:
                log.warning("could not read the tags of %s: %s", op.stack, err)
                tags = None
        return {str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else None

    def recorded_lifecycle(self, op: StackOp) -> lifecycle.Recorded | None:
        """The lifecycle state recorded beside the stack, when it still holds."""
        tags = self.read_tags(op)
        if tags is None:
            return None
        recorded = lifecycle.Recorded.from_tags(tags)
        return recorded if recorded is not None and recorded.current else None

    def _lean(self, op: StackOp, stack: auto.Stack, collector: EventCollector) -> bool:
        """On a DIY backend, spare the three engine invocations the Automation API makes after every
        up/destroy/refresh (`stack output` twice and `stack history`, about 1.5 s per stack): the change
        counts come from the engine's own summary event and the outputs from the checkpoint. Elsewhere
        the API's own calls are kept. (Pinned SDK: `Stack.up/destroy/refresh` call `self.outputs()` and
        `self.info()` after the command; these instance attributes shadow them for this one stack.)"""
        if diy_backend.stacks_dir(self.settings.backend_url, self.project_name) is None:
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

    def _invoke(
        self,
        op: StackOp,
        stack: auto.Stack,
        command: str,
        collector: EventCollector,
        write_log: Callable[[str], None],
        **kwargs: Any,
    ) -> StackResult:
        packs = self.policy_packs
        with self._policy_configs(op) as configs, _engine_trace(op.stack, stack):
            return self._run_command(op, stack, command, collector, write_log, packs, configs, **kwargs)

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

    def _run_command(
        self,
        op: StackOp,
        stack: auto.Stack,
        command: str,
        collector: EventCollector,
        write_log: Callable[[str], None],
        packs: list[str],
        configs: list[str],
        **kwargs: Any,
    ) -> StackResult:
        if command == "preview":
            preview = stack.preview(
                on_output=write_log,
                on_event=collector,
                policy_packs=packs,
                policy_pack_configs=configs,
                **kwargs,
            )
            changes = change_counts(preview.change_summary)
            changed = any(v for k, v in changes.items() if k != "same")
            return op.result("changes" if changed else "no-changes", changes=changes)
        lean = self._lean(op, stack, collector)
        if command == "up":
            up = stack.up(
                on_output=write_log,
                on_event=collector,
                policy_packs=packs,
                policy_pack_configs=configs,
                **kwargs,
            )
            if lean:
                changes = self._changes(stack, collector)
                outputs = self.outputs(op) or {}
            else:
                changes = change_counts(up.summary.resource_changes)
                outputs = {
                    name: (value.value if not value.secret else SECRET_PLACEHOLDER)
                    for name, value in up.outputs.items()
                }
            changed = any(v for k, v in changes.items() if k != "same")
            return op.result(
                "deployed" if changed else "unchanged",
                changes=changes,
                outputs=outputs,
                **ClusterOutputs.read(outputs).identity(),
            )
        if command == "destroy":
            if lean:
                with _engine_flags(stack, "--remove"):
                    stack.destroy(on_output=write_log, on_event=collector, **kwargs)
                # The stack is gone: its counts come from the engine's summary event or not at all.
                return op.result("destroyed", changes=change_counts(collector.summary))
            destroyed = stack.destroy(on_output=write_log, on_event=collector, **kwargs)
            stack.workspace.remove_stack(stack.name)
            return op.result("destroyed", changes=change_counts(destroyed.summary.resource_changes))
        if command == "refresh":
            refreshed = stack.refresh(on_output=write_log, on_event=collector, **kwargs)
            changes = (
                self._changes(stack, collector) if lean else change_counts(refreshed.summary.resource_changes)
            )
            drifted = any(v for k, v in changes.items() if k != "same")
            return op.result("drifted" if drifted else "in-sync", changes=changes)
        raise ValueError(f"unknown stack command {command!r}")


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
