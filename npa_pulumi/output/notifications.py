"""`--notify URL` and the spec's `notify:`: one JSON event (with a Slack-compatible `text`) posted when a
run needs a person.

A run notifies when its rollout halted, a health gate failed (a stack's recorded lifecycle is one of
FAILED_LIFECYCLES), or a destroy or cleanup ended incomplete (a failed stack, or a partial cleanup). A clean
run posts nothing. `health` notifies when it finds a cluster degraded or below `--min-usable`;
`health --watch` only when a cluster's condition changes (`HealthNotifier`). The event carries what the
pull-request comment would (fleet, command, outcome, the stacks that need a look and why), scrubbed the
same way (`cloud/redaction.scrub`): never a secret, a capacity-block id or a token. Each URL gets a few
bounded retries; one that still fails is a warning on the result, never a failed run. `targets` merges
`--notify` with the spec's list (an `${ENV_VAR}` entry read when the run posts).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from npa_pulumi import __version__
from npa_pulumi.cloud.redaction import scrub, scrub_document
from npa_pulumi.output.health import FleetHealth
from npa_pulumi.output.results import FAILED_LIFECYCLES, FleetResult, StackResult
from npa_pulumi.output.stack_outputs import ClusterOutputs
from npa_pulumi.runtime.retry import RetryPolicy, call_with_retry
from npa_pulumi.spec.notify_rules import env_name, url_problem

SCHEMA = "npa.notification/v1"
RETRY = RetryPolicy(max_attempts=3, initial_backoff_s=0.5, multiplier=2.0, max_backoff_s=2.0, jitter=0.0)
TIMEOUT_S = 10.0
MAX_STACKS = 20  # the event names at most this many stacks (the result has them all)
DEPLOYING = ("up", "adopt")  # the commands that run rollouts and health gates


class NotifyFailed(OSError):
    """An answer that is not 2xx: retried like a connection error (a 4xx too: the receiver may be
    starting), then reported as a warning."""


def _lifecycle(stack: StackResult) -> str | None:
    """The lifecycle the stack's outputs record (a cluster's gate verdict), if any."""
    return ClusterOutputs.read(stack.outputs).lifecycle


def reasons(result: FleetResult) -> list[str]:
    """Why this run notifies (empty: it does not): rollout-halted, gate-failed, destroy-incomplete. Only
    the run that made the change says so: `status` and the other reads show a halted rollout or a failed
    gate again and again, and post nothing."""
    found: list[str] = []
    deployed = result.command in DEPLOYING and not result.dry_run
    if deployed and result.rollout and result.rollout.get("halted"):
        found.append("rollout-halted")
    if deployed and any(_lifecycle(stack) in FAILED_LIFECYCLES for stack in result.clusters()):
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


# ---------------------------------------------------------------------------------- where events go


def targets(
    flags: Sequence[str], spec_entries: Sequence[str], environ: Mapping[str, str] = os.environ
) -> tuple[list[str], list[str]]:
    """The URLs a run posts to: `--notify`'s, then the spec's `notify` (an `${NAME}` entry read from the
    environment now), each once; and a warning for an entry that gives none (never its value)."""
    urls: list[str] = []
    warnings: list[str] = []
    for url in flags:
        if url and url not in urls:
            urls.append(url)
    for index, entry in enumerate(spec_entries):
        name = env_name(entry)
        url = environ.get(name, "").strip() if name else entry.strip()
        if name and not url:
            warnings.append(f"notify[{index}]: ${{{name}}} is not set: nothing is posted there")
            continue
        why = url_problem(url)
        if why is not None:
            warnings.append(f"notify[{index}]: ${{{name}}} {why}: nothing is posted there")
            continue
        if url not in urls:
            urls.append(url)
    return urls, warnings


# ---------------------------------------------------------------------------------- health

OK = "ok"
HEALTH_DEGRADED = "degraded"  # some of the cluster's GPUs are degraded
BELOW_MIN_USABLE = "below-min-usable"
HEALTH_EVENTS = {
    HEALTH_DEGRADED: "cluster-degraded",
    BELOW_MIN_USABLE: "below-min-usable",
    OK: "cluster-recovered",
}


def health_states(report: FleetHealth) -> dict[str, str]:
    """Each read cluster's condition: below-min-usable, degraded (a degraded GPU), or ok. A cluster that
    could not be read (`failed`) is left out: an unreadable read says nothing about its GPUs."""
    states: dict[str, str] = {}
    for cluster in report.clusters:
        if cluster.status == "failed":
            continue
        if cluster.status == BELOW_MIN_USABLE:
            states[cluster.stack] = BELOW_MIN_USABLE
        elif cluster.totals.degraded > 0:
            states[cluster.stack] = HEALTH_DEGRADED
        else:
            states[cluster.stack] = OK
    return states


def health_changes(before: Mapping[str, str] | None, after: Mapping[str, str]) -> dict[str, str]:
    """stack → its new condition, for each cluster whose condition changed. The first read (`before`
    None) is measured against a healthy fleet: what is degraded then is news; a cluster that is fine, not."""
    changed: dict[str, str] = {}
    for stack, state in after.items():
        was = (before or {}).get(stack, OK)
        if state != was:
            changed[stack] = state
    return changed


def health_event(report: FleetHealth, changed: Mapping[str, str]) -> dict[str, Any]:
    """The event of one health read with changes, scrubbed: which clusters changed, to what, their GPUs."""
    by_stack = {c.stack: c for c in report.clusters}
    clusters: list[dict[str, Any]] = []
    lines: list[str] = []
    for stack, state in list(changed.items())[:MAX_STACKS]:
        cluster = by_stack.get(stack)
        if cluster is None:
            continue
        totals = cluster.totals
        # What is wrong, as codes (NebiusGPUError, cordoned, not Ready (...)): a condition's message is left
        # out, as are node names (the receiver is told what to look at; `health` shows the nodes).
        problems = sorted({p.split(":", 1)[0].strip() for node in cluster.nodes for p in node.problems})[:5]
        clusters.append(
            {
                "stack": stack,
                "event": HEALTH_EVENTS[state],
                "state": state,
                "usable": totals.usable,
                "requested": totals.requested,
                "degraded": totals.degraded,
                "maintenance": totals.maintenance,
                **({"problems": problems} if problems else {}),
            }
        )
        lines.append(
            f"• {stack}: {state} ({totals.usable}/{totals.requested} GPUs usable"
            + (f", {totals.degraded} degraded" if totals.degraded else "")
            + (f": {'; '.join(problems)}" if problems else "")
            + ")"
        )
    events = sorted({HEALTH_EVENTS[c["state"]] for c in clusters})
    lines.insert(0, f"npa-pulumi health of fleet '{report.fleet}': {', '.join(events)}")
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "events": events,
        "fleet": report.fleet,
        "command": "health",
        "outcome": "degraded" if any(c["state"] != OK for c in clusters) else "recovered",
        "min_usable": report.min_usable,
        "clusters": clusters,
        "totals": report.totals.model_dump(),
        "version": __version__,
        "text": "\n".join(lines),
    }
    scrubbed: dict[str, Any] = scrub_document(document)
    return scrubbed


class HealthNotifier:
    """`health`'s notifications: called with each read (one, or every read of `--watch`), it posts one
    event when a cluster's condition changed since the last read; the warnings of posts that failed."""

    def __init__(self, urls: Sequence[str], **post_options: Any) -> None:
        self.urls = list(urls)
        self.post_options = post_options
        self.states: dict[str, str] | None = None
        self.open_breakers: set[str] = set()

    def __call__(self, report: FleetHealth) -> list[str]:
        now = {**(self.states or {}), **health_states(report)}  # an unreadable cluster keeps its last
        changed = health_changes(self.states, now)
        self.states = now
        documents = [health_event(report, changed)] if changed else []
        view = report.remediation
        if view is not None:
            # a breaker a watcher tripped (a dry run's plan names no one: nothing opened for real)
            opened = {str(b["scope"]) for b in view.open_breakers if b.get("opened_by")}
            tripped, self.open_breakers = sorted(opened - self.open_breakers), opened
            if tripped or view.actions:
                documents.append(remediation_event(report, tripped))
        if not self.urls:
            return []
        return [
            warning
            for document in documents
            for url in self.urls
            if (warning := post(url, document, **self.post_options))
        ]


def remediation_event(report: FleetHealth, tripped: Sequence[str]) -> dict[str, Any]:
    """The repair ladder's event of one read, scrubbed: the breakers that opened in it, and per cluster
    the actions taken in counts by rung and outcome (node names stay in `health` and the receipts)."""
    view = report.remediation
    counts: dict[str, dict[str, int]] = {}
    for action in (view.actions if view is not None else None) or []:
        per = counts.setdefault(str(action["cluster"]), {})
        key = f"{action['rung']} {action['outcome']}"
        per[key] = per.get(key, 0) + 1
    events = (["breaker-open"] if tripped else []) + (["remediation-actions"] if counts else [])
    lines = [f"npa-pulumi health of fleet '{report.fleet}': {', '.join(events)}"]
    lines += [f"• breaker {scope} open: no repair acts there until a person resets it" for scope in tripped]
    lines += [
        f"• {cluster}: " + ", ".join(f"{k} {n}" for k, n in sorted(per.items()))
        for cluster, per in counts.items()
    ]
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "events": events,
        "fleet": report.fleet,
        "command": "health",
        "outcome": "remediation",
        "breakers_opened": list(tripped),
        "actions": counts,
        "version": __version__,
        "text": "\n".join(lines),
    }
    scrubbed: dict[str, Any] = scrub_document(document)
    return scrubbed
