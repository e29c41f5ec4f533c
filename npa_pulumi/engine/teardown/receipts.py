"""Receipts: one JSON file per teardown run (destroy, its resume, the cloud sweep), 0600, under
`<npa home>/teardown-receipts/<fleet>/`: what was asked and each phase's outcome with the ids deleted or
retained. Ids, flags and names only, never a secret. One writer builds every receipt (`receipt`)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.retries import Retry, receipt_resume
from npa_pulumi.engine.teardown.model import RECEIPT_VERSION, STACK_PHASES, UNFINISHED, TeardownOptions
from npa_pulumi.engine.teardown.records import private_dir
from npa_pulumi.output.results import TeardownPhase
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import npa_home

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext


@dataclass(frozen=True)
class ReceiptIdentity:
    """Which fleet, cloud and state a teardown ran against: names and paths, never credentials. A resume
    reads it back to continue without the spec."""

    fleet: str
    cloud: str
    backend: str
    profile: str | None = None
    tenant_id: str | None = None
    region: str | None = None
    spec_path: str | None = None
    passphrase_file: str | None = None  # where the state passphrase is read from, never the passphrase

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> ReceiptIdentity:
        known = {f.name for f in fields(cls)}
        return cls(**{k: document.get(k) for k in known})  # type: ignore[arg-type]


def fleet_receipt(
    context: FleetContext,
    command: str,
    options: TeardownOptions,
    phases: list[TeardownPhase],
    started: float,
    outcome: str,
    path: Path,
    resumes: str | None = None,
    resume_command: str | None = None,
) -> dict[str, Any]:
    """The receipt of a destroy or cloud sweep of this run's selection, with the identity a later
    `destroy --receipt ID` needs to continue without the spec."""
    spec_path = str(Path(context.spec_path).resolve()) if context.spec_path else None
    passphrase = context.where.passphrase_file
    identity = ReceiptIdentity(
        fleet=context.spec.name,
        cloud=context.where.cloud,
        backend=context.settings.backend_url,
        profile=context.profile or None,
        tenant_id=context.spec.tenant_id or None,
        region=context.spec.region or None,
        spec_path=spec_path,
        passphrase_file=str(Path(passphrase).resolve()) if passphrase else None,
    )
    projects = sorted({t.project_key for t in context.targets})
    clusters = sorted(t.cluster_stack for t in context.targets)
    asked = (projects, clusters, options)
    return receipt(command, path, identity, asked, phases, started, outcome, resumes, resume_command)


def receipt(
    command: str,
    path: Path,
    identity: ReceiptIdentity,
    asked: tuple[list[str], list[str], TeardownOptions],
    phases: list[TeardownPhase],
    started: float,
    outcome: str,
    resumes: str | None = None,
    resume_command: str | None = None,
) -> dict[str, Any]:
    """The receipt document of one run: `asked` is (projects, clusters, the deletion options)."""
    projects, clusters, options = asked
    return {
        "version": RECEIPT_VERSION,
        "id": path.stem,
        "command": command,
        **{f.name: getattr(identity, f.name) for f in fields(identity)},
        "resumes": resumes,
        "resume_command": resume_command,
        "asked": {
            "projects": projects,
            "clusters": clusters,
            **{f.name: getattr(options, f.name) for f in fields(options)},
        },
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) if outcome != "running" else None,
        "outcome": outcome,
        "phases": [p.to_json() for p in phases],
    }


def receipts_root() -> Path:
    """Where every fleet's teardown receipts live (one folder per fleet)."""
    return npa_home() / "teardown-receipts"


def receipts_dir(fleet: str) -> Path:
    return receipts_root() / fleet


def new_receipt_path(fleet: str, kind: str = "destroy") -> Path:
    """Where a new receipt goes; its file name without `.json` is the receipt id (`destroy --receipt ID`)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return private_dir(receipts_dir(fleet)) / f"{stamp}-{os.getpid()}-{kind}.json"


def write_receipt(
    fleet: str, document: dict[str, Any], path: Path | None = None, kind: str = "destroy"
) -> Path:
    if path is None:
        path = new_receipt_path(fleet, kind)
    write_atomically(path, json.dumps(document, indent=2, sort_keys=True) + "\n", mode=0o600)
    return path


def resume_retry(receipt_id: str, phases: list[TeardownPhase], spec_path: str | None) -> Retry:
    """The one retry that continues a partial cleanup from its receipt. Only the guarded phases
    (bucket, storage identity, project) run without the spec; an unfinished stack phase needs it."""
    stacks_left = any(p.phase in STACK_PHASES and p.status in UNFINISHED for p in phases)
    return receipt_resume(receipt_id, spec_path if stacks_left else None)


def unrestored_relaxation(fleet: str, stack: str, cluster_id: str) -> tuple[str, list[dict[str, Any]]] | None:
    """The system PodDisruptionBudgets an earlier destroy of this cluster removed and never saw restored or
    gone (a run killed between the two): the newest receipt whose drain of the cluster ran says so, with
    the snapshots to put them back from. None when the last drain of it finished its business."""
    for path in sorted(receipts_dir(fleet).glob("*.json"), reverse=True):
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for phase in document.get("phases") or [] if isinstance(document, dict) else []:
            drain = phase.get("drain") if isinstance(phase, dict) else None
            if phase.get("phase") != "cluster" or phase.get("stack") != stack or not isinstance(drain, dict):
                continue
            if (
                drain.get("status") == "previewed"
                or (phase.get("deletes") or {}).get("cluster_id") != cluster_id
            ):
                continue
            if drain.get("relaxation") != "relaxed":
                return None
            pending = [s for s in drain.get("relaxed") or [] if isinstance(s, dict) and not s.get("restored")]
            return (path.stem, pending) if pending else None
    return None
