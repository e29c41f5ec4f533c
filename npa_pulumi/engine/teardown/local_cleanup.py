"""`npa-pulumi cleanup` without a spec: local only. What the npa home holds, what of it is residue of stacks
that no longer exist, and the receipts.

* **Survey** (read-only): work dirs (`work/<stack>`), kubeconfigs and their registrations, teardown records,
  logs, caches, receipts, stale run records; for each stack-bound item whether its stack still exists in the
  backend. Only a file:// backend can be read without the engine and the network; anything bound to a stack
  of another backend is `verification_unresolved` and never removed. Stacks that still exist and hold a
  cluster or a project are listed with the exact command that stops their spend.
* **`--yes`** removes operational residue: work dirs, kubeconfigs and registrations of stacks verified gone
  (with the original's `~/.npa/clusters/<context>/` record a registration names, while it is still this
  fleet's record of that cluster), and run records whose process is provably dead. Logs, receipts and
  teardown records are audit evidence and stay (a teardown record is the proof `destroy --receipt` needs to
  continue).
* **Receipts**: listed with their outcome; `--prune-receipts --receipt-retention-days N` deletes only
  receipts older than N days whose teardown is fully terminal (it ended `ok`, or a chain of resumes that
  continued it did).

Nothing here talks to a cloud or starts the engine.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from npa_pulumi.engine import npa_records
from npa_pulumi.engine.automation import (
    PROJECT_NAME,
    checkpoint_dir,
    checkpoint_outputs,
    file_backend_root,
    stored_tags,
)
from npa_pulumi.engine.runlock import RECORD_LOCKED, read_run_record
from npa_pulumi.engine.teardown.receipts import receipts_root
from npa_pulumi.output.markdown import backend_label
from npa_pulumi.runtime.home import npa_home

DAY_S = 86_400.0


@dataclass
class HomeItem:
    """One thing in the npa home that belongs to a stack (or a run)."""

    kind: str  # work-dir | kubeconfig | npa-registration | run-record
    path: str
    stack: str | None
    stack_state: str  # exists | gone | unverified | not-applicable
    bytes: int
    removable: bool
    reason: str
    removed: bool = False


@dataclass
class ReceiptInfo:
    id: str
    fleet: str
    kind: str
    outcome: str
    finished_at: str | None
    age_days: float
    terminal: bool
    path: str
    pruned: bool = False


@dataclass
class LocalCleanupReport:
    command: str = "cleanup"
    scope: str = "local"
    npa_home: str = ""
    backend: str = ""
    items: list[HomeItem] = field(default_factory=list)
    receipts: list[ReceiptInfo] = field(default_factory=list)
    still_costing: list[dict[str, str]] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)  # logs, caches, teardown records: kept
    removed: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def operational_residue_present(self) -> bool:
        return any(i.removable and not i.removed for i in self.items)

    @property
    def verification_unresolved(self) -> list[str]:
        return [i.path for i in self.items if i.stack_state == "unverified"]

    @property
    def audit_receipts_retained(self) -> int:
        return sum(1 for r in self.receipts if not r.pruned)

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        document.update(
            operational_residue_present=self.operational_residue_present,
            audit_receipts_retained=self.audit_receipts_retained,
            verification_unresolved=self.verification_unresolved,
        )
        return document


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


class _Stacks:
    """Whether a stack exists, read from a file:// backend's checkpoints; None when that cannot be known."""

    def __init__(self, backend_url: str) -> None:
        self.directory = checkpoint_dir(backend_url, PROJECT_NAME)
        self.backend_url = backend_url

    def exists(self, stack: str) -> bool | None:
        if self.directory is None:
            return None
        return any((self.directory / f"{stack}{ext}").exists() for ext in (".json", ".json.gz"))

    def deployed(self) -> Iterator[tuple[str, dict[str, Any]]]:
        if self.directory is None or not self.directory.is_dir():
            return
        for checkpoint in sorted(self.directory.glob("*.json")):
            outputs = checkpoint_outputs(self.backend_url, checkpoint.stem, PROJECT_NAME)
            if isinstance(outputs, dict):
                yield checkpoint.stem, outputs


def _state(exists: bool | None) -> str:
    return {True: "exists", False: "gone", None: "unverified"}[exists]


def _stack_item(kind: str, path: Path, stack: str, stacks: _Stacks) -> HomeItem:
    exists = stacks.exists(stack)
    reason = {
        True: "its stack exists: in use",
        False: "its stack no longer exists: residue",
        None: "the backend is not a local file:// one: whether its stack exists cannot be checked here",
    }[exists]
    return HomeItem(kind, str(path), stack, _state(exists), _size(path), exists is False, reason)


def _work_dirs(home: Path, stacks: _Stacks) -> list[HomeItem]:
    root = home / "work"
    return (
        [_stack_item("work-dir", d, d.name, stacks) for d in sorted(root.iterdir()) if d.is_dir()]
        if (root.is_dir())
        else []
    )


def _kubeconfigs(home: Path, stacks: _Stacks) -> list[HomeItem]:
    items = []
    for registration in sorted((home / "clusters").glob("*.json")):
        try:
            document = json.loads(registration.read_text())
        except (OSError, ValueError):
            document = {}
        document = document if isinstance(document, dict) else {}
        stack = str(document.get("stack") or "")
        for path in (home / "kubeconfigs" / f"{registration.stem}.yaml", registration):
            if path.exists() and stack:
                items.append(_stack_item("kubeconfig", path, stack, stacks))
        record = _npa_record(document)
        if record is not None and stack:
            items.append(_stack_item("npa-registration", record, stack, stacks))
    return items


def _npa_record(registration: dict[str, Any]) -> Path | None:
    """The original's record (`~/.npa/clusters/<context>/`) this registration's write made, while it is
    still this fleet's record of that cluster (engine/npa_records.py): another tool's record is never
    residue of ours."""
    written = str(registration.get("npa_record") or "")
    context = str(registration.get("context") or "")
    if not written or not context or Path(written) != npa_records.record_dir(context):
        return None
    ours = npa_records.is_ours(
        context,
        fleet=str(registration.get("fleet") or ""),
        project_key=str(registration.get("project_key") or ""),
        cluster_id=str(registration.get("cluster_id") or ""),
    )
    return Path(written) if ours else None


def _run_records(backend_url: str) -> list[HomeItem]:
    root = file_backend_root(backend_url)
    if root is None:
        return []
    items = []
    for path in sorted((root / ".npa-runs").glob("*/*.json")):
        record = read_run_record(path)
        if record is None or record.alive:
            continue
        reason = "a run record whose process is gone (a killed run): stale"
        if record.locked:
            reason += f" ({RECORD_LOCKED})"
        items.append(HomeItem("run-record", str(path), None, "not-applicable", _size(path), True, reason))
    return items


def _resolved(documents: dict[str, dict[str, Any]]) -> set[str]:
    """Receipt ids whose teardown is fully terminal: it ended ok, or a resume of it (transitively) did."""
    done = {rid for rid, doc in documents.items() if doc.get("outcome") == "ok"}
    changed = True
    while changed:
        changed = False
        for rid, doc in documents.items():
            continued = doc.get("resumes")
            if rid in done and isinstance(continued, str) and continued not in done:
                done.add(continued)
                changed = True
    return done


def _receipts(home: Path, now: float) -> list[ReceiptInfo]:
    documents: dict[str, dict[str, Any]] = {}
    paths: dict[str, Path] = {}
    for path in sorted(receipts_root().glob("*/*.json")):
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            document = {}
        documents[path.stem] = document if isinstance(document, dict) else {}
        paths[path.stem] = path
    resolved = _resolved(documents)
    return [
        ReceiptInfo(
            id=rid,
            fleet=paths[rid].parent.name,
            kind=str(doc.get("command") or rid.rsplit("-", 1)[-1]),
            outcome=str(doc.get("outcome") or "unreadable"),
            finished_at=doc.get("finished_at"),
            age_days=round((now - paths[rid].stat().st_mtime) / DAY_S, 2),
            terminal=rid in resolved,
            path=str(paths[rid]),
        )
        for rid, doc in documents.items()
    ]


def _still_costing(stacks: _Stacks) -> list[dict[str, str]]:
    costing = []
    for stack, outputs in stacks.deployed():
        # What bills: a cluster (and its node groups), a bucket's storage; a network or a project does not.
        billed = (("cluster", "cluster_id"), ("bucket", "bucket_id"))
        holds = [f"{kind} {outputs[key]}" for kind, key in billed if outputs.get(key)]
        if not holds:
            continue
        tags = stored_tags(stacks.backend_url, PROJECT_NAME, stack)
        tags = tags if isinstance(tags, dict) else {}
        fleet, project = tags.get("npa:fleet", "<fleet>"), tags.get("npa:project", "<project>")
        cluster = tags.get("npa:cluster")
        command = f"npa-pulumi destroy --spec <the spec of fleet {fleet}> --only-projects {project}"
        if cluster:
            command += f" --only-clusters {cluster}"
        costing.append({"stack": stack, "holds": ", ".join(holds), "command": command + " --yes"})
    return costing


def survey(backend_url: str, now: float | None = None) -> LocalCleanupReport:
    home = npa_home()
    stacks = _Stacks(backend_url)
    now = time.time() if now is None else now
    report = LocalCleanupReport(npa_home=str(home), backend=backend_label(backend_url))
    report.items = [*_work_dirs(home, stacks), *_kubeconfigs(home, stacks), *_run_records(backend_url)]
    report.receipts = _receipts(home, now)
    report.still_costing = _still_costing(stacks)
    for name in ("logs", "cache", "teardown"):
        path = home / name
        report.sizes[name] = _size(path) if path.exists() else 0
    return report


def remove_residue(report: LocalCleanupReport) -> None:
    """Delete the removable items (stacks verified gone, dead runs' records); nothing else."""
    for item in report.items:
        if not item.removable:
            continue
        path = Path(item.path)
        try:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError as err:
            report.errors.append(f"{path}: {err}")
            continue
        item.removed = True
        report.removed.append(item.path)


def prune_receipts(report: LocalCleanupReport, retention_days: float) -> None:
    """Delete receipts older than `retention_days` whose teardown is fully terminal; keep every other."""
    for receipt in report.receipts:
        if not receipt.terminal or receipt.age_days < retention_days:
            continue
        try:
            Path(receipt.path).unlink(missing_ok=True)
        except OSError as err:
            report.errors.append(f"{receipt.path}: {err}")
            continue
        receipt.pruned = True
        report.pruned.append(receipt.id)
