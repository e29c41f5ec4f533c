"""Selecting a stack for the engine, or creating it: as few engine starts as the backend allows.

On a file:// or s3:// backend the checkpoint says whether a stack exists, so a known stack is selected
without `pulumi stack select` and a new one created without trying to select it first; a new cluster stack
is made with its project stack's passphrase salt (one key derivation per engine run, not two).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from npa_pulumi.engine.automation import diy_backend
from npa_pulumi.engine.automation.diy_backend import checkpoint_outputs
from npa_pulumi.engine.automation.locks import LockRecovery
from npa_pulumi.engine.automation.stack_op import StackOp
from npa_pulumi.engine.automation.workspace import PASSPHRASE, EngineSettings, workspace_options
from npa_pulumi.errors import NpaError

if TYPE_CHECKING:
    from pulumi import automation as auto


def _read_only_program() -> None:
    raise RuntimeError("a stack selected only to be read was asked to run its program")


class StackSelector:
    """The Automation API's Stack objects for one command's stacks."""

    def __init__(self, settings: EngineSettings, project_name: str, locks: LockRecovery) -> None:
        self.settings = settings
        self.project_name = project_name
        self.locks = locks
        self.created: set[str] = set()  # stacks this command created (they carry no tags yet)
        self._creation_locks: dict[str, threading.Lock] = {}  # one `stack init` per new stack at a time
        self._creation_locks_lock = threading.Lock()

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
                        stack = self.locks.creating(
                            op.stack,
                            lambda: auto.create_stack(
                                op.stack, project_name=self.project_name, program=program, opts=key_shared
                            ),
                        )
                        self.created.add(op.stack)
                        return stack
                    except auto.StackAlreadyExistsError:  # another process made it meanwhile
                        opts = workspace_options(self.settings, program, self.project_name)
            if create:
                try:
                    stack = self.locks.creating(
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
        except auto.CommandError as err:
            unreachable = backend_unreachable(op.stack, err)
            if unreachable is None:
                raise
            raise unreachable from None
        return stack

    def exists(self, stack_name: str) -> bool:
        return self.select(StackOp(stack_name, "project", "", None, None, {}), create=False) is not None

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


class BackendUnreachable(NpaError):
    """The state backend did not answer when a stack was selected or created (its S3 endpoint down)."""

    kind = "backend-unreachable"


# What the engine's AWS SDK (gocloud.dev's s3blob) prints when the endpoint answers nothing at all.
_UNREACHABLE = ("connection refused", "request send failed", "no such host", "i/o timeout")


def backend_unreachable(stack: str, err: Exception) -> BackendUnreachable | None:
    """The stack's failure as a clean error when the engine could not reach the backend, else None."""
    stderr = str(getattr(err, "stderr", "") or err)
    if not any(marker in stderr for marker in _UNREACHABLE):
        return None
    lines = [line.partition("error:")[2].strip() for line in stderr.splitlines() if "error:" in line]
    why = lines[0] if lines else stderr.strip().splitlines()[-1]
    return BackendUnreachable(f"stack {stack}: the state backend did not answer ({why}); run again")
