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
* **`--full`** also looks for what a killed run could not clean up and what earlier layouts left behind,
  and (with `--yes`) removes it, each only where it is provably npa's:
  - *failed scratch cleanups* (`failed-scratch`): the private temporary directories npa-pulumi makes and
    removes itself, left behind when a run was killed: a preview's Terraform scratch (`npa-plan-*`: the
    recipe, `.terraform` providers and a copy of the stack's Terraform state), a client certificate's
    key files (`npa-kube-*`), merged policy configs (`npa-policy-config-*`) and engine trace files
    (`npa-engine-trace-*`). Proof: the exact name `tempfile.mkdtemp` gives that prefix, a real
    directory (no link) of this user with mode 0700, holding only what that code writes there; and it must
    be idle (nothing in it changed for an hour, no process of this user works in it or uses it as its
    temporary directory).
  - *caches of earlier layouts* (`earlier-layout`): plugin-host and plugin-guard wrappers under
    `<npa home>/bin/` written for an interpreter or a plugin binary that no longer exists (an earlier
    install), exactly as npa-pulumi writes them; and the original `npa fleet` tool's shared Terraform
    provider cache, `<NPA_CONFIG_DIR or ~/.npa>/fleet/<fleet>/.tf-plugin-cache`, when it holds nothing
    but provider packages in Terraform's plugin-cache layout (never a state, a lock file or an install
    directory: those are the original's and stay).
  Each is checked again right before it is removed. Credentials, the state passphrase, state and
  receipts are never in scope.

Nothing here talks to a cloud or starts the engine.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from npa_pulumi.engine.automation import (
    PROJECT_NAME,
    checkpoint_dir,
    checkpoint_outputs,
    file_backend_root,
    stored_tags,
)
from npa_pulumi.engine.registrations import npa_records
from npa_pulumi.engine.runlock import RECORD_LOCKED, read_run_record
from npa_pulumi.engine.teardown.receipts import receipts_root
from npa_pulumi.output.markdown import backend_label
from npa_pulumi.runtime.home import npa_home

DAY_S = 86_400.0


@dataclass
class HomeItem:
    """One thing in the npa home that belongs to a stack (or a run)."""

    kind: str  # work-dir | kubeconfig | npa-registration | run-record | failed-scratch | earlier-layout
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
    still this fleet's record of that cluster (engine/registrations/npa_records.py): another tool's record is
    never residue of ours."""
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


def survey(backend_url: str, now: float | None = None, full: bool = False) -> LocalCleanupReport:
    """What the npa home holds; `full`: also failed scratch cleanups and caches of earlier layouts."""
    home = npa_home()
    stacks = _Stacks(backend_url)
    now = time.time() if now is None else now
    report = LocalCleanupReport(npa_home=str(home), backend=backend_label(backend_url))
    report.scope = "local-full" if full else "local"
    report.items = [*_work_dirs(home, stacks), *_kubeconfigs(home, stacks), *_run_records(backend_url)]
    if full:
        report.items += [*failed_scratch(now), *earlier_layouts(home)]
    report.receipts = _receipts(home, now)
    report.still_costing = _still_costing(stacks)
    for name in ("logs", "cache", "teardown"):
        path = home / name
        report.sizes[name] = _size(path) if path.exists() else 0
    return report


def remove_residue(report: LocalCleanupReport) -> None:
    """Delete the removable items (stacks verified gone, dead runs' records, and with `--full` the scratch
    and earlier-layout caches, each proved again right before); nothing else."""
    for item in report.items:
        if not item.removable:
            continue
        path = Path(item.path)
        problem = _PROVERS[item.kind](path) if item.kind in _PROVERS else None
        if problem is not None:
            item.removable = False
            item.reason = f"kept: {problem}"
            continue
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


# --------------------------------------------------------------------------------- cleanup --full

SCRATCH_IDLE_S = 3600.0  # a scratch dir changed within the last hour may belong to a run still going
# tempfile.mkdtemp's names: the prefix, then 8 characters of its alphabet.
_SCRATCH = re.compile(r"^npa-(plan|kube|policy-config|engine-trace)-[a-z0-9_]{8}$")
# What each kind of scratch holds at its top level (exactly what the code that makes it writes there).
_SCRATCH_CONTENT: dict[str, re.Pattern[str]] = {
    "plan": re.compile(r"^(work|preview\.tfplan)$"),  # components/terraform_module.py plan_preview
    "kube": re.compile(r"^tls\.(crt|key)$"),  # kube/client.py, a client certificate's chain
    "policy-config": re.compile(r"^(builtin|others)\.json$"),  # engine/automation/stack_operations.py
    "engine-trace": re.compile(r"^\d{4}-[^/]+\.jsonl$"),  # runtime/tracing.py
}
_WHAT_SCRATCH = {
    "plan": "a preview's Terraform scratch (recipe, providers, a copy of the Terraform state)",
    "kube": "a Kubernetes client certificate's key files",
    "policy-config": "merged CrossGuard policy configs",
    "engine-trace": "the engine's unscrubbed trace files",
}


def _newest_mtime(path: Path) -> float:
    newest = path.lstat().st_mtime
    for child in path.rglob("*"):
        try:
            newest = max(newest, child.lstat().st_mtime)
        except OSError:
            continue
    return newest


def _used_by_a_process(path: Path) -> bool | None:
    """Whether a process of this user works inside `path`, holds a file in it, or uses it as its
    temporary directory; None where that cannot be known (no /proc)."""
    proc = Path("/proc")
    if not (proc / "self").is_dir():
        return None
    inside = str(path)
    uid = os.getuid()

    def within(target: str) -> bool:
        return target == inside or target.startswith(inside + "/")

    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            if within(os.readlink(entry / "cwd")):
                return True
            if any(within(os.readlink(fd)) for fd in (entry / "fd").iterdir()):
                return True
            environ = (entry / "environ").read_bytes().split(b"\0")
            if f"TMPDIR={inside}".encode() in environ:
                return True
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return False


def _private_dir_of_mine(path: Path) -> str | None:
    """None when `path` is a real directory (not a link) of this user with mode 0700; else why not."""
    try:
        info = path.lstat()
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "not a plain directory"
    if info.st_uid != os.getuid():
        return "another user's"
    if stat.S_IMODE(info.st_mode) != 0o700:
        return f"mode {stat.S_IMODE(info.st_mode):o}, not the 0700 npa-pulumi makes"
    return None


def prove_scratch(path: Path, now: float | None = None) -> str | None:
    """None when `path` is provably a failed scratch cleanup of npa-pulumi, idle; else why it is not."""
    match = _SCRATCH.match(path.name)
    if match is None:
        return "not a name npa-pulumi's scratch has"
    problem = _private_dir_of_mine(path)
    if problem:
        return problem
    kind = match.group(1)
    try:
        entries = list(path.iterdir())
        if any(not _SCRATCH_CONTENT[kind].match(e.name) or e.is_symlink() for e in entries):
            return "holds something npa-pulumi does not write there"
        if kind == "plan" and any(e.name == "work" and not e.is_dir() for e in entries):
            return "holds something npa-pulumi does not write there"
        idle_since = _newest_mtime(path)
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if (time.time() if now is None else now) - idle_since < SCRATCH_IDLE_S:
        return "changed within the last hour: a run may still use it"
    used = _used_by_a_process(path)
    if used is None:
        return "whether a process uses it cannot be checked here (no /proc)"
    if used:
        return "a running process uses it"
    return None


def failed_scratch(now: float) -> list[HomeItem]:
    """npa-pulumi's private temporary directories a killed run left in the temporary directory."""
    root = Path(tempfile.gettempdir())
    items = []
    for path in sorted(root.glob("npa-*")) if root.is_dir() else []:
        match = _SCRATCH.match(path.name)
        if match is None:
            continue
        problem = prove_scratch(path, now)
        what = _WHAT_SCRATCH[match.group(1)]
        reason = (
            f"{what}, left by a run that did not finish" if problem is None else f"{what}? kept: {problem}"
        )
        try:
            size = _size(path)
        except OSError:
            size = 0
        items.append(
            HomeItem("failed-scratch", str(path), None, "not-applicable", size, problem is None, reason)
        )
    return items


def _wrapper_target(path: Path) -> list[str] | None:
    """What a `<npa home>/bin/` wrapper runs, exactly as engine/automation/workspace.py writes it: the
    interpreter (and for a guard, the plugin binary); None when the file is not such a wrapper."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.splitlines()
    if not lines or lines[0] != "#!/bin/sh" or not text.endswith("\n"):
        return None
    try:
        last = shlex.split(lines[-1])
    except ValueError:
        return None
    if path.name.startswith("plugin-python-"):
        # ... exec PYTHON -u -m npa_pulumi.runtime.plugin_host "$@"
        if last[:1] == ["exec"] and last[2:] == ["-u", "-m", "npa_pulumi.runtime.plugin_host", "$@"]:
            return [last[1]]
        return None
    # guarded-KEY/NAME: exec PYTHON -m npa_pulumi.runtime.plugin_guard REAL "$@"
    guard = ["-m", "npa_pulumi.runtime.plugin_guard"]
    shaped = len(lines) == 2 and len(last) == 6 and last[0] == "exec" and last[2:4] == guard
    if shaped and last[5] == "$@" and Path(last[4]).name == path.name:
        return [last[1], last[4]]
    return None


_WRAPPER_KEY = re.compile(r"^(plugin-python|guarded)-[0-9a-f]{12}$")


def prove_stale_wrapper(path: Path) -> str | None:
    """None when `path` is a wrapper npa-pulumi wrote for an interpreter or plugin that no longer exists."""
    if _WRAPPER_KEY.match(path.name) is None:
        return "not a name npa-pulumi's wrappers have"
    if path.is_symlink():
        return "a link"
    files = [path] if path.name.startswith("plugin-python-") else []
    if path.name.startswith("guarded-"):
        problem = _plain_dir(path)
        if problem:
            return problem
        files = list(path.iterdir())
        if len(files) != 1:
            return "holds something npa-pulumi does not write there"
    elif not path.is_file():
        return "not a plain file"
    runs = _wrapper_target(files[0])
    if runs is None:
        return "not a wrapper as npa-pulumi writes it"
    if all(Path(target).exists() for target in runs):
        return "what it runs still exists: in use by this or another install"
    return None


def _plain_dir(path: Path) -> str | None:
    try:
        info = path.lstat()
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return "not a plain directory of this user"
    return None


# Terraform's plugin-cache layout: HOST/NAMESPACE/TYPE/VERSION/OS_ARCH/terraform-provider-TYPE* (unpacked)
# or HOST/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip (packed).
_UNPACKED = re.compile(
    r"^[a-z0-9.-]+\.[a-z]+/[^/]+/([^/]+)/[^/]+/[a-z0-9]+_[a-z0-9]+/terraform-provider-([^/]+)$"
)
_PACKED = re.compile(r"^[a-z0-9.-]+\.[a-z]+/[^/]+/([^/]+)/terraform-provider-([^/]+)\.zip$")


def prove_plugin_cache(path: Path) -> str | None:
    """None when `path` holds nothing but Terraform provider packages in the plugin-cache layout."""
    if path.name != ".tf-plugin-cache":
        return "not the original's plugin cache"
    problem = _plain_dir(path)
    if problem:
        return problem
    found = 0
    for child in path.rglob("*"):
        relative = child.relative_to(path).as_posix()
        if child.is_symlink():
            return f"holds a link ({relative})"
        if child.is_dir():
            continue
        match = _UNPACKED.match(relative) or _PACKED.match(relative)
        if match is None or not match.group(2).startswith(match.group(1)):
            return f"holds {relative}, which is no provider package"
        found += 1
    return None if found else "holds no provider package"


def earlier_layouts(home: Path) -> list[HomeItem]:
    """Wrappers of earlier installs under `<npa home>/bin/`, and the original tool's Terraform plugin
    caches."""
    from npa_pulumi.cloud.user_defaults import original_config_dir

    items = []
    bin_dir = home / "bin"
    for path in sorted(bin_dir.iterdir()) if bin_dir.is_dir() else []:
        if _WRAPPER_KEY.match(path.name) is None:
            continue
        problem = prove_stale_wrapper(path)
        reason = (
            "a plugin wrapper of an earlier install (what it runs is gone)"
            if problem is None
            else f"a plugin wrapper; kept: {problem}"
        )
        items.append(
            HomeItem(
                "earlier-layout", str(path), None, "not-applicable", _size(path), problem is None, reason
            )
        )
    for path in sorted((original_config_dir() / "fleet").glob("*/.tf-plugin-cache")):
        problem = prove_plugin_cache(path)
        reason = (
            "the original npa fleet tool's shared Terraform provider cache (re-downloaded when needed)"
            if problem is None
            else f"the original npa fleet tool's provider cache; kept: {problem}"
        )
        items.append(
            HomeItem(
                "earlier-layout", str(path), None, "not-applicable", _size(path), problem is None, reason
            )
        )
    return items


def _prove_earlier(path: Path) -> str | None:
    return prove_plugin_cache(path) if path.name == ".tf-plugin-cache" else prove_stale_wrapper(path)


_PROVERS = {"failed-scratch": prove_scratch, "earlier-layout": _prove_earlier}
