"""`--notify URL`: one JSON event (with a Slack-compatible `text`) posted when a run needs a person.

A run notifies when its rollout halted, a health gate failed (a stack's recorded lifecycle is one of
FAILED_LIFECYCLES), or a destroy or cleanup ended incomplete (a failed stack, or a partial cleanup). A clean
run posts nothing. The event carries what the pull-request comment would (fleet, command, outcome, the
stacks that need a look and why), scrubbed the same way (`cloud/redaction.scrub`): never a secret, a
capacity-block id or a token. Each URL gets a few bounded retries; one that still fails is a warning on the
result, never a failed run.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from npa_pulumi import __version__
from npa_pulumi.cloud.redaction import scrub, scrub_document
from npa_pulumi.output.results import FAILED_LIFECYCLES, FleetResult, StackResult
from npa_pulumi.output.stack_outputs import ClusterOutputs
from npa_pulumi.runtime.retry import RetryPolicy, call_with_retry

SCHEMA = "npa.notification/v1"
RETRY = RetryPolicy(max_attempts=3, initial_backoff_s=0.5, multiplier=2.0, max_backoff_s=2.0, jitter=0.0)
TIMEOUT_S = 10.0
MAX_STACKS = 20  # the event names at most this many stacks (the result has them all)


class NotifyFailed(OSError):
    """An answer that is not 2xx: retried like a connection error (a 4xx too: the receiver may be
    starting), then reported as a warning."""


def _lifecycle(stack: StackResult) -> str | None:
    """The lifecycle the stack's outputs record (a cluster's gate verdict), if any."""
    return ClusterOutputs.read(stack.outputs).lifecycle


def reasons(result: FleetResult) -> list[str]:
    """Why this run notifies (empty: it does not): rollout-halted, gate-failed, destroy-incomplete."""
    found: list[str] = []
    if result.rollout and result.rollout.get("halted"):
        found.append("rollout-halted")
    if any(_lifecycle(stack) in FAILED_LIFECYCLES for stack in result.clusters()):
        found.append("gate-failed")
    ended = result.command in ("destroy", "cleanup") and not result.dry_run
    if ended and (result.partial_cleanup or result.failed_count):
        found.append("destroy-incomplete")
    return found


def event(result: FleetResult, why: Sequence[str]) -> dict[str, Any]:
    """The one event of a run, scrubbed: the fields a receiver reads, and `text` for a Slack webhook."""
    attention = [
        stack
        for stack in result.stacks
        if stack.failed or _lifecycle(stack) in FAILED_LIFECYCLES or stack.status == "skipped"
    ]
    stacks = [
        {
            "stack": stack.stack,
            "status": stack.status,
            **({"lifecycle": lifecycle} if (lifecycle := _lifecycle(stack)) else {}),
            **({"error": scrub(stack.error.splitlines()[0])[:300]} if stack.error else {}),
        }
        for stack in attention[:MAX_STACKS]
    ]
    halted = (result.rollout or {}).get("halted") or {}
    lines = [f"npa-pulumi {result.command} of fleet '{result.fleet}': {', '.join(why)} ({result.outcome})"]
    if halted:
        lines.append(f"rollout halted at wave {halted.get('wave')}: {halted.get('reason')}")
    lines += [f"• {s['stack']}: {s.get('lifecycle') or s['status']}" for s in stacks]
    if result.resume_command:
        lines.append(f"continue with: {result.resume_command}")
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "events": list(why),
        "fleet": result.fleet,
        "command": result.command,
        "outcome": result.outcome,
        "backend": result.backend,
        "totals": result.totals(),
        "stacks": stacks,
        "rollout_halted": halted or None,
        "resume_command": result.resume_command,
        "version": __version__,
        "text": "\n".join(lines),
    }
    scrubbed: dict[str, Any] = scrub_document(document)
    return scrubbed


def post(
    url: str,
    document: dict[str, Any],
    policy: RetryPolicy = RETRY,
    timeout_s: float = TIMEOUT_S,
    sleep: Callable[[float], None] | None = None,
) -> str | None:
    """POST the event to one URL with bounded retries; the warning when it still failed (None: sent)."""
    body = json.dumps(document).encode("utf-8")

    def send() -> None:
        request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                response.read()
        except urllib.error.HTTPError as err:
            raise NotifyFailed(f"HTTP {err.code}") from err

    try:
        call_with_retry(send, retry_on=OSError, what="notification", policy=policy, sleep=sleep)
    except OSError as err:
        # The URL may carry a token (a Slack webhook's path): never printed whole.
        return f"notification to {_where(url)} failed after {policy.max_attempts} attempt(s): {err}"
    return None


def _where(url: str) -> str:
    """A webhook URL without its path and query (which may be the secret)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0].rsplit('@', 1)[-1]}/…"


def notify(result: FleetResult, urls: Sequence[str], **post_options: Any) -> list[str]:
    """Post the run's event to every URL when it needs a person; the warnings of those that failed."""
    why = reasons(result)
    if not urls or not why:
        return []
    document = event(result, why)
    return [warning for url in urls if (warning := post(url, document, **post_options))]
