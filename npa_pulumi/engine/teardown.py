"""Teardown you can audit: `destroy` as ordered phases, each with an outcome, evidence and a receipt.

Per project of the selection the phases run in this order:

    cluster (one per cluster stack) -> network (the project stack) -> bucket -> storage-identity -> project

* cluster: the cluster stack is destroyed (what it will delete is read from its outputs);
* network: the project stack is destroyed once none of the project's cluster stacks remain; an owned
  network/subnet goes with it, a reused subnet is only read and stays;
* bucket, storage-identity, project: retained unless asked for (`--delete-buckets`,
  `--delete-storage-identity`, `--delete-projects`), and even then deleted only with durable proof that
  this fleet created them: the creation recorded in the project stack's outputs (or, once that stack is
  gone, in the teardown record written before it was destroyed) *and* the fleet's labels on the live
  object. A bucket that holds objects is refused unless `--delete-nonempty-buckets`; a project that
  holds anything the fleet did not create (or anything retained) is refused.

Outcomes: `planned` (dry run), `done`, `absent` (nothing there: repeat-safe), `retained` (why), `blocked`
(by which phase: a dependent phase is never guessed) or `failed` (why, and the exact retry command).
Independent phases continue when one fails: a failed bucket does not stop the storage identity, but it
blocks the project.

Every destroy leaves a receipt, `<npa home>/teardown-receipts/<fleet>/<UTC time>-destroy.json` (0600):
what was asked and each phase's outcome with the ids deleted or retained. Receipts and teardown records
hold ids and flags only, never a secret (the access key's secret, a token, a capacity block).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.guarded_phases import GuardedPhases, phase_factory
from npa_pulumi.engine.workspace import stack_names
from npa_pulumi.output.results import TeardownPhase
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import npa_home

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.engine.orchestrator import Fleet
    from npa_pulumi.engine.programs import ProjectPlan
    from npa_pulumi.output.results import FleetResult, StackResult

log = logging.getLogger(__name__)

RECEIPT_VERSION = 1
STACK_PHASES = ("cluster", "network")  # phases that destroy a Pulumi stack (and so need the spec)
UNFINISHED = ("planned", "failed", "blocked")


@dataclass(frozen=True)
class TeardownOptions:
    delete_buckets: bool = False
    delete_nonempty_buckets: bool = False
    delete_storage_identity: bool = False
    delete_projects: bool = False

    def flags(self) -> list[str]:
        """The CLI flags that ask for the same (for exact retry commands)."""
        names = {
            "delete_buckets": "--delete-buckets",
            "delete_nonempty_buckets": "--delete-nonempty-buckets",
            "delete_storage_identity": "--delete-storage-identity",
            "delete_projects": "--delete-projects",
        }
        return [flag for name, flag in names.items() if getattr(self, name)]


@dataclass
class ProjectEvidence:
    """What a project stack recorded about what it owns: ids and creation flags, nothing secret. Kept as the
    project's teardown record (`<npa home>/teardown/<fleet>/<project stack>.json`) before the stack is
    destroyed, so a later, narrower teardown (`--delete-buckets` after the stack is gone) still has proof."""

    project_stack: str
    project_key: str
    project_id: str = ""
    project_created: bool = False
    network_id: str = ""
    subnet_id: str = ""
    network_owned: bool = False
    bucket_id: str = ""
    bucket_name: str = ""
    bucket_created: bool = False
    service_account_id: str = ""
    service_account_created: bool = False
    key_id: str = ""

    @classmethod
    def from_outputs(cls, stack: str, project_key: str, outputs: dict[str, Any]) -> ProjectEvidence:
        def text(name: str) -> str:
            value = outputs.get(name)
            return value if isinstance(value, str) else ""

        return cls(
            project_stack=stack,
            project_key=project_key,
            project_id=text("project_id"),
            project_created=outputs.get("project_created") is True,
            network_id=text("network_id"),
            subnet_id=text("subnet_id"),
            network_owned=outputs.get("network_owned") is True,
            bucket_id=text("bucket_id"),
            bucket_name=text("bucket_name"),
            bucket_created=outputs.get("bucket_created") is True,
            service_account_id=text("storage_service_account_id"),
            service_account_created=outputs.get("storage_service_account_created") is True,
            key_id=text("storage_key_id"),
        )

    def merged_with(self, record: ProjectEvidence | None) -> ProjectEvidence:
        """A re-deployed stack finds what an earlier one created (and records `created: false`); the
        earlier record of the same ids still proves it."""
        if record is None:
            return self
        same = record.project_id == self.project_id
        return ProjectEvidence(
            **{
                **asdict(self),
                "project_created": self.project_created or (same and record.project_created),
                "bucket_created": self.bucket_created
                or (bool(self.bucket_id) and record.bucket_id == self.bucket_id and record.bucket_created),
                "service_account_created": self.service_account_created
                or (
                    bool(self.service_account_id)
                    and record.service_account_id == self.service_account_id
                    and record.service_account_created
                ),
            }
        )


# --------------------------------------------------------------------------------------- records


def records_dir(fleet: str) -> Path:
    return npa_home() / "teardown" / fleet


def receipts_root() -> Path:
    """Where every fleet's teardown receipts live (one folder per fleet)."""
    return npa_home() / "teardown-receipts"


def receipts_dir(fleet: str) -> Path:
    return receipts_root() / fleet


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def read_record(fleet: str, stack: str) -> ProjectEvidence | None:
    path = records_dir(fleet) / f"{stack}.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        log.warning("teardown record %s is unreadable (%s): treated as no proof", path, err)
        return None
    known = {f.name for f in fields(ProjectEvidence)}
    try:
        return ProjectEvidence(**{k: v for k, v in data.items() if k in known})
    except TypeError:
        return None


def write_record(fleet: str, evidence: ProjectEvidence) -> None:
    path = _private_dir(records_dir(fleet)) / f"{evidence.project_stack}.json"
    write_atomically(path, json.dumps(asdict(evidence), indent=2, sort_keys=True) + "\n", mode=0o600)


def drop_record(fleet: str, stack: str) -> None:
    (records_dir(fleet) / f"{stack}.json").unlink(missing_ok=True)


def new_receipt_path(fleet: str, kind: str = "destroy") -> Path:
    """Where a new receipt goes; its file name without `.json` is the receipt id (`destroy --receipt ID`)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return _private_dir(receipts_dir(fleet)) / f"{stamp}-{os.getpid()}-{kind}.json"


def write_receipt(
    fleet: str, document: dict[str, Any], path: Path | None = None, kind: str = "destroy"
) -> Path:
    if path is None:
        path = new_receipt_path(fleet, kind)
    write_atomically(path, json.dumps(document, indent=2, sort_keys=True) + "\n", mode=0o600)
    return path


def resume_command(receipt_id: str, phases: list[TeardownPhase], spec_path: str | None) -> str:
    """The one command that continues a partial cleanup from its receipt. Only the guarded phases
    (bucket, storage identity, project) run without the spec; an unfinished stack phase needs it."""
    stacks_left = any(p.phase in STACK_PHASES and p.status in UNFINISHED for p in phases)
    spec = f" --spec {shlex.quote(spec_path)}" if stacks_left and spec_path else ""
    return f"npa-pulumi destroy --receipt {receipt_id}{spec} --yes"


class Teardown:
    """Plans (read-only) and runs the phases of one `destroy` of a fleet's selection."""

    def __init__(self, fleet: Fleet, options: TeardownOptions) -> None:
        self.fleet = fleet
        self.options = options
        self.evidence: dict[str, ProjectEvidence] = {}
        self.stack_exists: dict[str, bool] = {}
        self.shared: set[str] = set()  # project stacks whose other (unselected) cluster stacks remain
        self.guarded = GuardedPhases(
            fleet.cloud,
            fleet.spec.name,
            options,
            fleet.progress.message,
            lambda key: self.retry_command(key, None),
        )

    @property
    def cloud(self) -> CloudPort:
        return self.fleet.cloud

    @property
    def name(self) -> str:
        return self.fleet.spec.name

    def retry_command(self, project_key: str, cluster: str | None) -> str:
        base = self.fleet._retry_command("destroy", project_key, cluster).removesuffix(" --yes")
        return " ".join([base, *self.options.flags(), "--yes"])

    # ---------------------------------------------------------------------------------- plan

    def plan(self) -> list[TeardownPhase]:
        """Every phase with what it would delete or retain and why. Reads stack outputs and the live
        cloud; changes nothing."""
        from npa_pulumi.engine.stack_operations import StackOp

        plans = self.fleet.plans()
        phases: list[TeardownPhase] = []
        cluster_ops = [self.fleet._cluster_op(c) for c in plans.clusters]
        cluster_outputs = self.fleet.stack_outputs(cluster_ops)
        stage = self.fleet.options.stage
        for cluster in plans.clusters:
            outputs = cluster_outputs.get(cluster.stack)
            phase = phase_factory(cluster.project_key, cluster.stack)("cluster")
            if outputs is None:
                phase.status, phase.reason = "absent", "no cluster stack: nothing to delete"
            elif stage == "projects":
                phase.status, phase.retains = "retained", {"cluster_stack": cluster.stack}
                phase.reason = "--stage projects destroys no cluster stack (that is `--stage clusters`)"
            else:
                phase.deletes = {
                    "cluster_stack": cluster.stack,
                    "cluster_id": str(outputs.get("cluster_id") or ""),
                    "node_group_ids": [str(i) for i in (outputs.get("node_group_ids") or [])],
                    "kube_context": str(outputs.get("kube_context") or ""),
                }
                if outputs.get("kuberay_objects"):  # deleted by the stack's destroy, before the cluster
                    phase.deletes["kuberay_objects"] = [str(o) for o in outputs["kuberay_objects"]]
                    phase.retains = {"ray_application_outputs": "the user's own buckets and filesystems"}
            phases.append(phase)
        # The clusters this run deletes are not "something else in the project".
        self.guarded.doomed_clusters = {
            str(p.deletes.get("cluster_id"))
            for p in phases
            if p.status == "planned" and p.deletes.get("cluster_id")
        }
        # In the projects stage every remaining cluster stack keeps its project, selected or not.
        selected = {c.stack for c in plans.clusters} if stage != "projects" else set()
        existing = set(stack_names(self.fleet.settings))
        project_ops = [StackOp(p.stack, "project", p.project_key, None, None, {}) for p in plans.projects]
        project_outputs = self.fleet.stack_outputs(project_ops)
        for project in plans.projects:
            others = sorted(n for n in existing if n.startswith(f"{project.stack}.") and n not in selected)
            phases.extend(self._plan_project(project, project_outputs.get(project.stack), others))
        if stage == "clusters":
            for item in phases:
                if item.phase != "cluster" and item.status == "planned":
                    item.status, item.retains, item.deletes = "retained", {**item.deletes}, {}
                    item.reason = (
                        "--stage clusters keeps the project stacks (`destroy --stage projects` next)"
                    )
        return phases

    def _plan_project(
        self, project: ProjectPlan, outputs: dict[str, Any] | None, others: list[str]
    ) -> list[TeardownPhase]:
        record = read_record(self.name, project.stack)
        self.stack_exists[project.stack] = outputs is not None
        phase = phase_factory(project.project_key, project.stack)
        if outputs is not None:
            evidence = ProjectEvidence.from_outputs(project.stack, project.project_key, outputs).merged_with(
                record
            )
        elif record is not None:
            evidence = record
        else:
            return [
                phase(
                    "network",
                    status="absent",
                    reason="no project stack and no teardown record: nothing this fleet owns to delete",
                )
            ]
        self.evidence[project.stack] = evidence

        phases = [self._plan_network(evidence, phase, outputs is not None)]
        phases.extend(self.guarded.plan(evidence, phase, phases))
        if others:
            self.shared.add(project.stack)
            why = f"cluster stack(s) {', '.join(others)} of this project remain (not selected)"
            if self.fleet.options.stage == "projects":
                why = (
                    f"cluster stack(s) {', '.join(others)} of this project remain: destroy them first "
                    "(`npa-pulumi destroy --stage clusters`, sharded or not)"
                )
            for item in phases:
                if item.status == "planned":
                    item.status, item.reason = "retained", why
                    item.retains, item.deletes = {**item.retains, **item.deletes}, {}
                elif item.phase == "network" and item.status == "retained":
                    # A reused subnet is retained anyway; the project stack stays too, and this says why.
                    item.reason = f"{why}; {item.reason}"
        return phases

    def _plan_network(
        self, ev: ProjectEvidence, phase: Callable[..., TeardownPhase], stack_exists: bool
    ) -> TeardownPhase:
        if not stack_exists:
            return phase("network", status="absent", reason="the project stack is already destroyed")
        if ev.network_owned:
            return phase(
                "network",
                deletes={
                    "project_stack": ev.project_stack,
                    "network_id": ev.network_id,
                    "subnet_id": ev.subnet_id,
                },
            )
        # The project stack still goes (in this phase); the reused subnet and its network stay.
        if ev.project_created:
            why = (
                "the subnet was not created by this fleet but came with the project it created (the "
                "cloud's default network): it goes only with the project phase (--delete-projects)"
            )
        else:
            why = "the subnet was reused, not created by this fleet: it is read, never deleted"
        return phase(
            "network",
            status="retained",
            retains={"subnet_id": ev.subnet_id, "network_id": ev.network_id},
            reason=f"{why} (the project stack itself is destroyed)",
        )

    # ---------------------------------------------------------------------------------- run

    def run(self, result: FleetResult, phases: list[TeardownPhase]) -> None:
        """Run the planned phases in order, filling `result` (stacks and phases) as they finish."""
        from npa_pulumi.engine import kubeconfigs
        from npa_pulumi.engine.lifecycle import TAG_RUN, destroy_incomplete_tags
        from npa_pulumi.plan.naming import kube_context_name

        fleet = self.fleet
        plans = fleet.plans()
        by_stack = {p.stack: p for p in phases if p.phase == "cluster"}
        stage = fleet.options.stage
        cluster_ops = [fleet._cluster_op(c) for c in plans.clusters] if stage != "projects" else []
        if any(p.status == "planned" and p.stack for p in phases):  # some stack will be destroyed
            fleet.warm_provider_host()
        destroyed = fleet._pool(cluster_ops, lambda op: fleet.executor.run(op, "destroy"))
        for item in destroyed:
            phase = by_stack[item.stack]
            if item.status == "failed":
                item.status = "destroy-incomplete"
                item.retry_command = self.retry_command(item.project_key, item.cluster_name)
                phase.status, phase.reason, phase.retry_command = "failed", item.error, item.retry_command
                # What `status` shows on any machine until a destroy succeeds (engine/lifecycle.py).
                op = next(o for o in cluster_ops if o.stack == item.stack)
                tags = destroy_incomplete_tags(item.error or "the destroy failed", item.retry_command)
                fleet.executor.write_lifecycle(op, tags, remove=(TAG_RUN,))
            elif item.status in ("destroyed", "absent") and item.cluster_name:
                # Only once the stack is gone: a kubeconfig is how a half-destroyed cluster is inspected.
                context = kube_context_name(fleet.spec.name, item.project_key, item.cluster_name)
                kubeconfigs.remove(context, item.stack)
                phase.status = "done" if item.status == "destroyed" else "absent"
        result.stacks.extend(destroyed)
        if fleet.options.shard or stage == "clusters":
            # Another shard may still be destroying clusters of the same projects: deciding here whether a
            # project stack is unused would race it. A final unsharded `destroy` removes the project stacks.
            if stage == "clusters":
                why = (
                    "--stage clusters: project stacks are kept; once every cluster stage has finished, run "
                    "`npa-pulumi destroy --stage projects` to remove the project stacks no cluster uses"
                )
            else:
                why = (
                    f"shard {fleet.options.shard}: project stacks are kept; once every shard has finished, "
                    "run `npa-pulumi destroy` without --shard to remove the project stacks no cluster uses "
                    "any more"
                )
            for phase in phases:
                if phase.phase != "cluster" and phase.status == "planned":
                    phase.status, phase.reason = "retained", why
            result.warnings.append(why)
            return
        for project in plans.projects:
            mine = [p for p in phases if p.stack == project.stack]
            failed = [
                p.name
                for p in phases
                if p.phase == "cluster" and p.project_key == project.project_key and p.status == "failed"
            ]
            if failed:
                for waiting in mine:
                    if waiting.status == "planned":
                        waiting.status, waiting.blocked_by = "blocked", failed
                        waiting.reason = "a cluster of this project was not destroyed"
                continue
            self._run_project(result, project, mine)

    def _run_project(self, result: FleetResult, project: ProjectPlan, phases: list[TeardownPhase]) -> None:
        evidence = self.evidence.get(project.stack)
        network = next((p for p in phases if p.phase == "network"), None)
        if evidence is not None:
            write_record(self.name, evidence)  # the proof outlives the project stack
        # Other clusters of the project still use its network: the project stack stays.
        destroy_stack = self.stack_exists.get(project.stack) and project.stack not in self.shared
        if network is not None and destroy_stack and network.status in ("planned", "retained"):
            stack_result = self._destroy_project_stack(project)
            result.stacks.append(stack_result)
            if stack_result.failed:
                network.status, network.reason = "failed", stack_result.error
                network.retry_command = stack_result.retry_command
            elif network.status == "planned":
                network.status = "done"
        if evidence is not None:
            self.guarded.run(evidence, project.project_key, phases)
            settle_record(self.name, evidence, phases)

    def _destroy_project_stack(self, project: ProjectPlan) -> StackResult:
        fleet = self.fleet
        item = fleet.executor.run(fleet._project_op(project), "destroy")
        if item.status == "failed":
            item.status = "destroy-incomplete"
            item.retry_command = self.retry_command(project.project_key, None)
        return item


def settle_record(fleet: str, ev: ProjectEvidence, phases: list[TeardownPhase]) -> None:
    """Forget what is gone; drop the record once nothing this fleet created remains to prove."""
    done = {p.phase for p in phases if p.status in ("done", "absent")}
    if "bucket" in done:
        ev.bucket_id, ev.bucket_name, ev.bucket_created = "", "", False
    if "storage-identity" in done:
        ev.service_account_id, ev.service_account_created, ev.key_id = "", False, ""
    if "network" in done:
        ev.network_id, ev.subnet_id, ev.network_owned = "", "", False
    if "project" in done or not (ev.project_created or ev.bucket_created or ev.service_account_created):
        drop_record(fleet, ev.project_stack)
    else:
        write_record(fleet, ev)


def receipt_document(
    fleet: Fleet,
    options: TeardownOptions,
    phases: list[TeardownPhase],
    started: float,
    outcome: str,
    path: Path,
    resumes: str | None = None,
) -> dict[str, Any]:
    """The receipt: ids, flags, identity (names, never credentials) and outcomes only (never a secret).
    It holds what `destroy --receipt ID` needs to continue without the spec."""
    spec_path = str(Path(fleet.options.spec_path).resolve()) if fleet.options.spec_path else None
    # Where the state passphrase is read from (a path, never the passphrase): a resume needs the same.
    passphrase = fleet.options.passphrase_file
    return {
        "version": RECEIPT_VERSION,
        "id": path.stem,
        "command": "destroy",
        "fleet": fleet.spec.name,
        "cloud": fleet.options.cloud,
        "backend": fleet.settings.backend_url,
        "profile": fleet.profile or None,
        "tenant_id": fleet.spec.tenant_id or None,
        "region": fleet.spec.region or None,
        "spec_path": spec_path,
        "passphrase_file": str(Path(passphrase).resolve()) if passphrase else None,
        "resumes": resumes,
        "resume_command": resume_command(path.stem, phases, spec_path)
        if outcome == "partial-cleanup"
        else None,
        "asked": {
            "projects": sorted({t.project_key for t in fleet.targets}),
            "clusters": sorted(t.cluster_stack for t in fleet.targets),
            **{f.name: getattr(options, f.name) for f in fields(options)},
        },
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) if outcome != "running" else None,
        "outcome": outcome,
        "phases": [p.to_json() for p in phases],
    }
