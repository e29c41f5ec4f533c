"""Pulumi behind one fence, with one face: the only code that imports `pulumi.automation` or reads and
writes the engine's own DIY backend files. Outside this package it is imported through this module only,
never its modules (tools/check_layers.py holds every other module to both).

The face (names load on first use, PEP 562: the SDK's backend URL must not bring the engine's runner):

* The runner: `StackExecutor.run(op, command)`, with the command's one provider host (`SharedProviderHost`,
  `HostMode`, `host_mode`) its engine runs share; runs a `StackCommand` (up, preview, refresh, destroy) on
  the stack a `StackOp` names and hands back a `StackResult` (output/results.py) whose `changes` are
  `change_counts`; the executor also reads what a stack recorded (outputs, tags, lifecycle, its newest
  update's result, one resource's output), the fallbacks through the engine included.
* The stack-state port, for the reads that need no runner: `stack_names` (the one listing),
  `list_fleet_stacks`, `stack_tags`, `stack_reference_name`, `StackLocked`; the DIY fast paths
  (`checkpoint_outputs` with `NO_FAST_PATH`, `checkpoint_dir`, `stored_tags`, `stack_interrupted`,
  `file_backend_root`, `s3_state_bucket`); the audit trail's store (`append_audit_record`,
  `read_audit_records`, `AuditUnavailable`).
* Where the state lives and how the engine is set up: `EngineSettings`, `PROJECT_NAME`,
  `DEFAULT_BACKEND_URL`, `resolve_backend_url`, `engine_version`; a federated run's minted key to its
  s3:// state bucket (`ensure_state_key`, `release_state_keys`, `StateKeys`, `StateKeyError`).

Inside, one concern per module:

* `stack_operations.py`: the runner (StackExecutor), composing the parts below;
* `stack_op.py`: StackOp, StackCommand and the change counts;
* `selection.py`: selecting or creating a stack with as few engine starts as the backend allows;
* `locks.py`: stale locks and pending operations left by a killed run, recovered; live holders named;
* `tags.py`: the npa tags and the lifecycle records beside each stack;
* `stack_state.py`: outputs, history, one resource's output and the recorded lifecycle;
* `engine_call.py`: the engine's command itself (policy packs and configs, the engine's trace, the lean path);
* `events.py`: the engine's event stream collected; its text made plain;
* `run_report.py`: a run's progress phases, trace attributes, log file and elapsed time;
* `listing.py`: stack names and the fleet's stacks;
* `workspace.py`: the backend URL, secrets, the workspace and the engine's environment;
* `diy_backend.py`: checkpoints, locks and tags read straight from a DIY backend (format versions pinned);
* `audit_store.py`: where the audit trail's records live in a DIY backend;
* `state_key.py`: a federated run's short-lived key to its s3:// state bucket, minted and deleted;
* `provider_host.py`: the command's shared dynamic-provider host (`SharedProviderHost`), served in the
  orchestrator's process or a process of its own (runtime/provider_host.py is the server itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from npa_pulumi.runtime.lazy_names import lazy_names

if TYPE_CHECKING:
    from npa_pulumi.engine.automation.audit_store import AuditUnavailable
    from npa_pulumi.engine.automation.audit_store import append as append_audit_record
    from npa_pulumi.engine.automation.audit_store import read_all as read_audit_records
    from npa_pulumi.engine.automation.diy_backend import NO_FAST_PATH, checkpoint_outputs
    from npa_pulumi.engine.automation.diy_backend import diy_root as file_backend_root
    from npa_pulumi.engine.automation.diy_backend import interrupted as stack_interrupted
    from npa_pulumi.engine.automation.diy_backend import read_tags as stored_tags
    from npa_pulumi.engine.automation.diy_backend import s3_bucket as s3_state_bucket
    from npa_pulumi.engine.automation.diy_backend import stacks_dir as checkpoint_dir
    from npa_pulumi.engine.automation.listing import (
        StackListingFailed,
        list_fleet_stacks,
        stack_names,
        stack_reference_name,
    )
    from npa_pulumi.engine.automation.locks import StackLocked
    from npa_pulumi.engine.automation.provider_host import HostMode, SharedProviderHost, host_mode
    from npa_pulumi.engine.automation.stack_op import StackCommand, StackOp, change_counts
    from npa_pulumi.engine.automation.stack_operations import StackExecutor
    from npa_pulumi.engine.automation.state_key import (
        StateKeyError,
        StateKeys,
        ensure_state_key,
        release_state_keys,
    )
    from npa_pulumi.engine.automation.tags import stack_tags
    from npa_pulumi.engine.automation.workspace import (
        DEFAULT_BACKEND_URL,
        PROJECT_NAME,
        EngineSettings,
        engine_version,
        resolve_backend_url,
    )

_MODULE_OF = {
    # the runner
    "StackExecutor": "stack_operations",
    # the command's one dynamic-provider host the engine runs share
    "HostMode": "provider_host",
    "SharedProviderHost": "provider_host",
    "host_mode": "provider_host",
    "StackCommand": "stack_op",
    "StackOp": "stack_op",
    "change_counts": "stack_op",
    # the stack-state port
    "StackListingFailed": "listing",
    "StackLocked": "locks",
    "list_fleet_stacks": "listing",
    "stack_names": "listing",
    "stack_reference_name": "listing",
    "stack_tags": "tags",
    "NO_FAST_PATH": "diy_backend",
    "checkpoint_outputs": "diy_backend",
    "checkpoint_dir": "diy_backend:stacks_dir",
    "file_backend_root": "diy_backend:diy_root",
    "s3_state_bucket": "diy_backend:s3_bucket",
    "stack_interrupted": "diy_backend:interrupted",
    "stored_tags": "diy_backend:read_tags",
    "AuditUnavailable": "audit_store",
    "append_audit_record": "audit_store:append",
    "read_audit_records": "audit_store:read_all",
    # a federated run's key to its s3:// state bucket
    "StateKeyError": "state_key",
    "StateKeys": "state_key",
    "ensure_state_key": "state_key",
    "release_state_keys": "state_key",
    # where the state lives, and the engine
    "DEFAULT_BACKEND_URL": "workspace",
    "EngineSettings": "workspace",
    "PROJECT_NAME": "workspace",
    "engine_version": "workspace",
    "resolve_backend_url": "workspace",
}

__all__ = [
    "DEFAULT_BACKEND_URL",
    "NO_FAST_PATH",
    "PROJECT_NAME",
    "AuditUnavailable",
    "EngineSettings",
    "HostMode",
    "SharedProviderHost",
    "StackCommand",
    "StackExecutor",
    "StackListingFailed",
    "StackLocked",
    "StackOp",
    "StateKeyError",
    "StateKeys",
    "append_audit_record",
    "change_counts",
    "checkpoint_dir",
    "checkpoint_outputs",
    "engine_version",
    "ensure_state_key",
    "file_backend_root",
    "host_mode",
    "list_fleet_stacks",
    "read_audit_records",
    "release_state_keys",
    "resolve_backend_url",
    "s3_state_bucket",
    "stack_interrupted",
    "stack_names",
    "stack_reference_name",
    "stack_tags",
    "stored_tags",
]

if not TYPE_CHECKING:  # type checkers read the names above; one the face does not offer is an error there
    __getattr__, __dir__ = lazy_names(__name__, _MODULE_OF, globals())
