"""The audit trail: one record per mutating run (`up`, `destroy`, `adopt`, `cleanup`, and the repairs
`verify-mig --reconcile`, `health --requalify`, each `health --watch --remediate` read that acted and a
`health breaker reset`), kept in the backend beside the stacks
(engine/automation/audit_store.py), listed by `npa-pulumi audit` and the last ones by `report`.

A record says who (the Nebius principal and profile, the OS user and host, the CI run's URL when one is
set), what (the command, the selection, the spec's digest, the npa-pulumi version), when (start and end,
UTC) and each stack's outcome (a repair's: what it did, in counts: node names stay in the repair's own
evidence). It holds what the pull-request comment may show, scrubbed the same way: never a secret, a token
or a capacity-block id.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from npa_pulumi import __version__
from npa_pulumi.cloud.redaction import scrub, scrub_document
from npa_pulumi.engine.automation import PROJECT_NAME, append_audit_record, read_audit_records
from npa_pulumi.output.health import FleetHealth
from npa_pulumi.output.results import FleetResult, StackResult
from npa_pulumi.output.stack_outputs import ClusterOutputs

SCHEMA = "npa.audit/v1"
MUTATING = ("up", "destroy", "adopt", "cleanup")
REPAIRS = {"verify-mig": "reconcile", "health": "requalify"}  # command -> the flag that makes it mutate
# `health breaker reset` records `repair: breaker-reset` (sdk/audit.py): a person closed a breaker


class Who(BaseModel):
    principal: str | None = None  # the Nebius subject the run acted as
    tenant: str | None = None
    profile: str | None = None
    os_user: str | None = None
    host: str | None = None
    ci_run_url: str | None = None

    @property
    def identity(self) -> str:
        """One string for "who": the cloud's principal, else the OS user at the host (what a breaker
        reset is compared by: engine/health/ledger.py)."""
        if self.principal:
            return self.principal
        return f"{self.os_user or 'unknown'}@{self.host or 'unknown'}"


class StackOutcome(BaseModel):
    stack: str
    kind: str
    status: str
    lifecycle: str | None = None
    error: str | None = None
    detail: str | None = None  # what a repair did there, in counts


class AuditRecord(BaseModel):
    schema_: str = Field(default=SCHEMA, alias="schema")
    command: str
    repair: str | None = None  # `reconcile` (verify-mig), `requalify` (health)
    fleet: str
    who: Who
    selection: dict[str, Any] = Field(default_factory=dict)
    spec_digest: str | None = None
    version: str = __version__
    cloud: str = ""
    started_at: str
    finished_at: str
    outcome: str
    totals: dict[str, int] = Field(default_factory=dict)
    stacks: list[StackOutcome] = Field(default_factory=list)
    receipt_id: str | None = None
    name: str | None = None  # the record's object name (set when read back)

    model_config = {"populate_by_name": True}

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


def ci_run_url(environ: Mapping[str, str] = os.environ) -> str | None:
    """The CI run that made the change: GitHub Actions, GitLab CI, Buildkite, Jenkins (or NPA_CI_RUN_URL)."""
    if environ.get("NPA_CI_RUN_URL"):
        return environ["NPA_CI_RUN_URL"]
    server, repository, run = (
        environ.get("GITHUB_SERVER_URL"),
        environ.get("GITHUB_REPOSITORY"),
        environ.get("GITHUB_RUN_ID"),
    )
    if server and repository and run:
        return f"{server.rstrip('/')}/{repository}/actions/runs/{run}"
    for name in ("CI_JOB_URL", "BUILDKITE_BUILD_URL", "BUILD_URL"):
        if environ.get(name):
            return environ[name]
    return None


def who(principal: Any = None, profile: str | None = None) -> Who:
    """Who runs this: the cloud's principal (a `cloud.port.Principal`, or None when it could not be read)."""
    try:
        os_user: str | None = getpass.getuser()
    except (KeyError, OSError):
        os_user = None
    return Who(
        principal=getattr(principal, "subject", None) or None,
        tenant=getattr(principal, "tenant_id", None) or None,
        profile=getattr(principal, "profile", None) or profile,
        os_user=os_user,
        host=socket.gethostname(),
        ci_run_url=ci_run_url(),
    )


def spec_digest(spec_path: str | None, spec_document: Any = None) -> str | None:
    """sha256 of the spec file's bytes (or of the spec's canonical JSON when it came from code)."""
    try:
        if spec_path:
            with open(spec_path, "rb") as handle:
                return "sha256:" + hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        pass
    if spec_document is None:
        return None
    text = json.dumps(spec_document, sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _first_line(error: str | None) -> str | None:
    return scrub(error.splitlines()[0])[:300] if error else None


def _repaired(stack: StackResult) -> str | None:
    """What `verify-mig --reconcile` did on a cluster (the publishable count its result carries)."""
    health = stack.health if isinstance(stack.health, dict) else {}
    count = health.get("repaired_stale_taint")
    if not isinstance(count, int):
        return None
    return f"removed the stale mig-not-ready taint from {count} node(s)" if count else "nothing to repair"


@dataclass(frozen=True)
class Run:
    """What every record says of the run it records, whatever the command."""

    command: str
    fleet: str
    cloud: str
    who: Who
    started_at: datetime
    selection: Mapping[str, Any]
    digest: str | None


def _finished(run: Run, **outcome: Any) -> AuditRecord:
    """The record of `run`, finished now, with its outcome's fields (repair, outcome, totals, stacks...)."""
    return AuditRecord(
        command=run.command,
        fleet=run.fleet,
        who=run.who,
        selection={k: v for k, v in run.selection.items() if v not in (None, (), [], "")},
        spec_digest=run.digest,
        cloud=run.cloud,
        started_at=run.started_at.astimezone(UTC).isoformat(timespec="seconds"),
        finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
        **outcome,
    )


def record(
    result: FleetResult,
    who_: Who,
    started_at: datetime,
    selection: Mapping[str, Any],
    digest: str | None,
    repair: str | None = None,
) -> AuditRecord:
    """The record of a run that finished with `result` (a repair: `repair` names it), scrubbed."""
    stacks = [
        StackOutcome(
            stack=stack.stack,
            kind=str(stack.kind),
            status=stack.status,
            lifecycle=ClusterOutputs.read(stack.outputs).lifecycle or None,
            error=_first_line(stack.error),
            detail=_repaired(stack) if repair else None,
        )
        for stack in result.stacks
    ]
    return _finished(
        Run(result.command, result.fleet, result.cloud, who_, started_at, selection, digest),
        repair=repair,
        outcome=result.outcome,
        totals=result.totals(),
        stacks=stacks,
        receipt_id=result.receipt_id,
    )


def requalify_record(
    report: FleetHealth,
    who_: Who,
    started_at: datetime,
    selection: Mapping[str, Any],
    digest: str | None,
) -> AuditRecord | None:
    """The record of `health --requalify` (None when no cluster got as far as looking for nodes to probe:
    nothing was touched). Per cluster: how many nodes were probed, passed, failed and refused."""
    stacks: list[StackOutcome] = []
    totals = {"clusters": 0, "nodes": 0, "passed": 0, "failed": 0, "refused": 0}
    for cluster in report.clusters:
        done = cluster.requalify
        if done is None:
            continue
        counts = {
            "nodes": len(done.get("nodes") or []),
            "passed": len(done.get("passed") or []),
            "failed": len(done.get("failed") or []),
            "refused": len(done.get("refused") or {}),
        }
        for key, value in counts.items():
            totals[key] += value
        totals["clusters"] += 1
        if not counts["nodes"]:
            status = "nothing-to-do"
        elif counts["failed"]:
            status = "failed"
        else:
            status = "requalified"
        stacks.append(
            StackOutcome(
                stack=cluster.stack,
                kind="cluster",
                status=status,
                error=_first_line(cluster.error),
                detail=f"probed {counts['nodes']} unqualified node(s): {counts['passed']} passed, "
                f"{counts['failed']} failed"
                + (f" ({counts['refused']} refused: GPU workloads ran)" if counts["refused"] else ""),
            )
        )
    if not stacks:
        return None
    failed = any(stack.status == "failed" for stack in stacks)
    return _finished(
        Run(report.command, report.fleet, report.cloud, who_, started_at, selection, digest),
        repair="requalify",
        outcome="failed" if failed else "ok",
        totals=totals,
        stacks=stacks,
    )


def remediation_record(
    report: FleetHealth,
    who_: Who,
    started_at: datetime,
    selection: Mapping[str, Any],
    digest: str | None,
) -> AuditRecord | None:
    """The record of one `health --watch --remediate` read that acted (None when it did nothing): per
    cluster the ladder's actions in counts by rung and outcome, never node names (those are in the
    actions' receipts)."""
    view = report.remediation
    done = (view.actions or []) if view is not None else []
    if not done:
        return None
    stacks = {f"{c.project_key}/{c.cluster_name}": c.stack for c in report.clusters}
    per: dict[str, dict[str, int]] = {}
    for action in done:
        counts = per.setdefault(str(action["cluster"]), {})
        key = f"{action['rung']} {action['outcome']}"
        counts[key] = counts.get(key, 0) + 1
    outcomes = [str(a["outcome"]) for a in done]
    return _finished(
        Run(report.command, report.fleet, report.cloud, who_, started_at, selection, digest),
        repair="remediate",
        outcome="failed" if "failed" in outcomes else "ok",
        totals={name: outcomes.count(name) for name in ("done", "skipped", "failed")},
        stacks=[
            StackOutcome(
                stack=stacks.get(cluster, cluster),
                kind="cluster",
                status="failed" if any(k.endswith(" failed") for k in counts) else "remediated",
                detail=", ".join(f"{k}: {n}" for k, n in sorted(counts.items())),
            )
            for cluster, counts in sorted(per.items())
        ],
    )


def append(backend_url: str, entry: AuditRecord) -> str:
    """Write the record beside the stacks; where it is. automation.AuditUnavailable when it cannot be."""
    text = json.dumps(scrub_document(entry.to_json()), indent=2, sort_keys=True) + "\n"
    return append_audit_record(backend_url, PROJECT_NAME, entry.fleet, text)


def read(backend_url: str, fleet: str, since: datetime | None = None) -> list[AuditRecord]:
    """The fleet's records, oldest first, from `since` (UTC) on; unreadable records are skipped."""
    found = []
    for name, text in read_audit_records(backend_url, PROJECT_NAME, fleet):
        try:
            entry = AuditRecord.model_validate(json.loads(text))
        except ValueError:
            continue
        if since is not None and datetime.fromisoformat(entry.started_at) < since:
            continue
        entry.name = name
        found.append(entry)
    return found
