"""A retry or a resume as the engine knows it: the operation and the request that does it again, never a
command line.

Where a run leaves something to do again (a failed stack, a cluster kept after its health gate failed, a
destroy that did not finish, a guarded phase refused, a partial cleanup, a halted rollout), the engine
makes a `Retry`: the `Operation` and its typed request (engine/requests.py), narrowed to what is left (one
project and cluster, the receipt, the rollout's waves), and the spec file the run read. Only the CLI spells
one as a command line (npa_pulumi/cli/retry_commands.py); the engine never names a flag.

Retries are also *stored* as text, where another machine reads them back: the destroy-incomplete lifecycle
tag (engine/lifecycle.py), the rollout's `npa:rollout-resume` tag, a receipt's `resume_command` and the
kubeconfig registration's destroy hint. That text comes from the renderer the engine's caller gives
(`RenderRetry`: the CLI passes its command-line renderer, so what it stores and prints is the command to
paste); without one (a Python caller of the SDK) it is the neutral form of `describe`, and the structured
`Retry` rides on the result (`StackResult.retry`, `TeardownPhase.retry`, `FleetResult.resume`) for the
caller to run again: `sdk.deploy(retry.spec_path, retry.request)`.

A retry's request holds exactly what its command line says (the selection, where the fleet lives, the
deletions asked for, the rollout's flags), so the CLI reads its rendering back as the same request.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.requests import (
    AdoptRequest,
    CleanupRequest,
    DestroyRequest,
    ReceiptDestroyRequest,
    Rollout,
    Selection,
    UpRequest,
    Where,
)
from npa_pulumi.engine.teardown.model import TeardownOptions

if TYPE_CHECKING:
    from npa_pulumi.output.results import FleetResult, StackResult, TeardownPhase


class Operation(StrEnum):
    """The operations a run can leave to be done again."""

    UP = "up"
    ADOPT = "adopt"
    DESTROY = "destroy"
    CLEANUP = "cleanup"


RetryRequest = UpRequest | AdoptRequest | DestroyRequest | CleanupRequest | ReceiptDestroyRequest

# The request types of each operation (a DestroyRequest is a CleanupRequest too: the type, not isinstance).
_REQUESTS: dict[Operation, tuple[type, ...]] = {
    Operation.UP: (UpRequest,),
    Operation.ADOPT: (AdoptRequest,),
    Operation.DESTROY: (DestroyRequest, ReceiptDestroyRequest),
    Operation.CLEANUP: (CleanupRequest,),
}


@dataclass(frozen=True)
class Retry:
    """What a run leaves to do again: `operation` with `request`, against the spec at `spec_path` (None: the
    run read none from a file; a receipt's resume names its spec in its request)."""

    operation: Operation
    request: RetryRequest
    spec_path: str | None = None

    def __post_init__(self) -> None:
        if type(self.request) not in _REQUESTS[self.operation]:
            raise TypeError(f"a {type(self.request).__name__} does not {self.operation}")


RenderRetry = Callable[[Retry], str]
"""How a caller spells a retry wherever text is shown or stored (the CLI: the command line)."""


def _where(where: Where) -> Where:
    """Where the fleet lives, as a retry names it (a new stack's secrets provider is the caller's)."""
    return Where(
        cloud=where.cloud,
        profile=where.profile,
        auth=where.auth,
        backend=where.backend,
        passphrase_file=where.passphrase_file,
    )


def stack_retry(
    operation: Operation,
    where: Where,
    spec_path: str | None,
    project_key: str,
    cluster: str | None = None,
    teardown: TeardownOptions | None = None,
) -> Retry:
    """`operation` again for one project (and cluster) of a run, where the run found the fleet; a destroy's
    with the deletions it was asked for."""
    selection = Selection(projects=(project_key,), clusters=(cluster,) if cluster else ())
    request: RetryRequest
    if operation is Operation.UP:
        request = UpRequest(selection=selection, where=_where(where))
    elif operation is Operation.ADOPT:
        request = AdoptRequest(selection=selection, where=_where(where))
    elif operation is Operation.DESTROY:
        request = DestroyRequest(
            selection=selection, where=_where(where), teardown=teardown or TeardownOptions()
        )
    else:
        raise ValueError(f"{operation} is not retried per stack")
    return Retry(operation, request, spec_path)


def cleanup_retry(where: Where, spec_path: str | None, teardown: TeardownOptions) -> Retry:
    """The cloud sweep again: it finds its candidates by the fleet's labels, so running it again is the
    retry (the whole fleet, with the same deletions)."""
    return Retry(Operation.CLEANUP, CleanupRequest(where=_where(where), teardown=teardown), spec_path)


def rollout_resume(where: Where, spec_path: str | None, rollout: Rollout) -> Retry:
    """The `up` that resumes a halted rollout (the whole fleet, the same waves and limits): finished waves
    are unchanged and pass through at once, so it starts again at the halted wave."""
    return Retry(Operation.UP, UpRequest(where=_where(where), rollout=rollout), spec_path)


def receipt_resume(receipt_id: str, spec_path: str | None = None) -> Retry:
    """`destroy` continuing the receipt `receipt_id` (with the spec when a stack phase is left)."""
    return Retry(Operation.DESTROY, ReceiptDestroyRequest(receipt=receipt_id, spec_path=spec_path))


# ------------------------------------------------------------------------------------ text


_BARE = re.compile(r"[^\s\"=\\]+")


def _value(value: str) -> str:
    return value if _BARE.fullmatch(value) else json.dumps(value)


def describe(retry: Retry) -> str:
    """The neutral text of a retry, for callers that give no renderer: logfmt, `operation=up spec=fleet.yaml
    cloud=local projects=alpha clusters=train` — each field the retry sets, once, in a fixed order; a value
    with a space, a quote or `=` double-quoted (JSON escapes). Lists are comma-joined; a deletion asked
    for is `delete_buckets=true`. Not a command line: only the CLI renders one."""
    request = retry.request
    fields: list[tuple[str, Any]] = [("operation", str(retry.operation))]
    if isinstance(request, ReceiptDestroyRequest):
        fields += [("receipt", request.receipt), ("spec", request.spec_path)]
    else:
        where = request.where
        fields += [
            ("spec", retry.spec_path),
            ("cloud", where.cloud),
            ("profile", where.profile),
            ("auth", where.auth),
            ("backend", where.backend),
            ("passphrase_file", where.passphrase_file),
            ("projects", ",".join(request.selection.projects)),
            ("clusters", ",".join(request.selection.clusters)),
        ]
        if isinstance(request, CleanupRequest):
            asked = request.teardown
            fields += [
                (f.name, "true" if getattr(asked, f.name) else None) for f in dataclasses.fields(asked)
            ]
        if isinstance(request, UpRequest):
            rollout = request.rollout
            fields += [
                ("waves", rollout.waves),
                ("max_in_flight", rollout.max_in_flight),
                ("max_in_flight_per_reservation", rollout.max_in_flight_per_reservation),
                ("ignore_maintenance", "true" if rollout.ignore_maintenance else None),
            ]
    return " ".join(f"{name}={_value(str(value))}" for name, value in fields if value)


def text_of(retry: Retry, render: RenderRetry | None) -> str:
    """The retry as the caller spells it (`render`), else its neutral text."""
    return (render or describe)(retry)


def attach(target: StackResult | TeardownPhase, retry: Retry, render: RenderRetry | None) -> str:
    """Put the retry on a stack's or a phase's result, structured and as text; the text."""
    target.retry = retry
    target.retry_command = text_of(retry, render)
    return target.retry_command


def attach_resume(result: FleetResult, retry: Retry, render: RenderRetry | None) -> str:
    """Put the one retry that continues a whole run (a partial cleanup) on its result; the text."""
    result.resume = retry
    result.resume_command = text_of(retry, render)
    return result.resume_command


__all__ = [
    "Operation",
    "RenderRetry",
    "Retry",
    "RetryRequest",
    "attach",
    "attach_resume",
    "cleanup_retry",
    "describe",
    "receipt_resume",
    "rollout_resume",
    "stack_retry",
    "text_of",
]
