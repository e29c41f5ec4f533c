"""`npa-pulumi cleanup`: what the fleet created that no stack references any more, found by the fleet's
labels, and deleted (with `--yes`) through the same guarded phases as `destroy` (engine/teardown/run.py).

Candidates are the tenant's projects that carry this fleet's labels (`npa-fleet=<fleet>`,
`managed-by=npa-pulumi`) and the spec's projects; inside them, networks, subnets, buckets and service
accounts with the fleet's labels whose ids no stack of the fleet (in this backend) names in its outputs.
Per project the phases are the teardown's: network (orphan subnets, then networks) → bucket → storage
identity (service account, its keys, and its grant's IAM group once no account of the fleet in the
project is referenced) → project, the last three only with the same opt-in flags as `destroy`; a
non-empty bucket is refused unless `--delete-nonempty-buckets`, and a project is deleted only when it is
itself an orphan and holds nothing else (every kind the cloud port lists: engine/teardown/phases.py). A
refused, failed or blocked phase is a partial cleanup (exit 2); a failed or refused phase blocks the
project; every run that deletes or refuses leaves a receipt
(`<npa home>/teardown-receipts/<fleet>/<UTC time>-<pid>-cleanup.json`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from npa_pulumi.cloud.absence import NotYetGone, delete_network, delete_subnet
from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.engine.automation import stack_names
from npa_pulumi.engine.retries import Retry, attach_resume, cleanup_retry
from npa_pulumi.engine.teardown.model import TeardownOptions
from npa_pulumi.engine.teardown.phases import (
    PhaseFactory,
    TeardownRefused,
    decide_project,
    default_topology,
    delete_bucket,
    delete_identity,
    delete_project,
    describe,
    fleet_groups,
    inventory_except,
    phase_factory,
    wait_settled,
)
from npa_pulumi.engine.teardown.phases import ours as _ours
from npa_pulumi.engine.teardown.receipts import fleet_receipt, new_receipt_path, write_receipt
from npa_pulumi.engine.teardown.records import drop_record
from npa_pulumi.output.results import UNFINISHED_OUTCOMES, PhaseOutcome, TeardownPhase
from npa_pulumi.output.stack_outputs import referenced_ids

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort, Project
    from npa_pulumi.engine.context import FleetContext
    from npa_pulumi.output.results import FleetResult


class Cleanup:
    def __init__(self, fleet: FleetContext, options: TeardownOptions) -> None:
        self.fleet = fleet
        self.options = options
        self.projects: dict[str, Project] = {}  # stack-like scope name -> project

    @property
    def cloud(self) -> CloudPort:
        return self.fleet.cloud

    @property
    def name(self) -> str:
        return self.fleet.spec.name

    def retry(self) -> Retry:
        """The sweep again, with the same deletions: it finds its candidates by the fleet's labels."""
        return cleanup_retry(self.fleet.where, self.fleet.spec_path, self.options)

    def referenced(self) -> set[str]:
        """Every id an existing stack of this fleet names in its outputs."""
        from npa_pulumi.engine.automation import StackOp

        prefix = f"{self.name}."
        settings = self.fleet.settings
        names = [n for n in stack_names(settings.backend_url, engine=settings) if n.startswith(prefix)]
        ops = [StackOp(n, "project", "", None, None, {}) for n in names]
        found: set[str] = set()
        for outputs in self.fleet.stack_outputs(ops, refresh=True).values():
            found |= referenced_ids(outputs)
        return found

    # ---------------------------------------------------------------------------------- plan

    def plan(self) -> list[TeardownPhase]:
        """Read-only: the orphans and what would be done with each."""
        referenced = self.referenced()
        keys = {t.project_key for t in self.fleet.targets}
        spec_ids = {t.project_id for t in self.fleet.targets if t.project_id}
        spec_names = {t.display_name for t in self.fleet.targets if not t.project_id}
        phases: list[TeardownPhase] = []
        for project in self.cloud.list_projects(self.fleet.tenant_id()):
            labelled = _ours(project.labels, self.name) and project.labels.get("npa-project") in keys
            if not (labelled or project.id in spec_ids or project.name in spec_names):
                continue
            scope = f"{self.name}.{project.labels.get('npa-project') or project.id}"
            self.projects[scope] = project
            phases.extend(self._plan_project(scope, project, labelled, referenced))
        return phases

    def _plan_project(
        self, scope: str, project: Project, labelled: bool, referenced: set[str]
    ) -> list[TeardownPhase]:
        cloud, pid = self.cloud, project.id
        key = project.labels.get("npa-project") or project.id

        phase = phase_factory(key, scope)

        def orphan(item_id: str, labels: dict[str, str]) -> bool:
            return _ours(labels, self.name) and item_id not in referenced

        phases: list[TeardownPhase] = []
        subnets = [s.id for s in cloud.list_subnets(pid) if orphan(s.id, s.labels)]
        networks = [n.id for n in cloud.list_networks(pid) if orphan(n.id, n.labels)]
        if subnets or networks:
            phases.append(phase("network", deletes={"subnet_ids": subnets, "network_ids": networks}))
        buckets = [b for b in cloud.list_buckets(pid) if orphan(b.id, b.labels)]
        for bucket in buckets:
            ids: dict[str, Any] = {"bucket_id": bucket.id, "bucket_name": bucket.name}
            count = cloud.count_bucket_objects(bucket.id)
            if not self.options.delete_buckets:
                phases.append(
                    phase("bucket", status="retained", retains=ids, reason="--delete-buckets not given")
                )
            elif count and not self.options.delete_nonempty_buckets:
                phases.append(
                    phase(
                        "bucket",
                        status="refused",
                        retains={**ids, "objects": count},
                        reason=f"bucket holds {count} object(s): refused unless --delete-nonempty-buckets",
                    )
                )
            else:
                phases.append(phase("bucket", deletes={**ids, "objects": count}))
        accounts = [a for a in cloud.list_service_accounts(pid) if _ours(a.labels, self.name)]
        orphans = [a for a in accounts if a.id not in referenced]
        # A grant's group serves the project's storage account: an orphan once no account of the fleet
        # in the project is referenced any more.
        groups = fleet_groups(cloud, pid, self.name) if len(orphans) == len(accounts) else []
        for index, account in enumerate(orphans):
            keys = [k.id for k in cloud.list_access_keys(pid, account.id)]
            mine = groups if index == 0 else []
            phases.append(self._identity_phase(phase, account.id, keys, mine))
        if groups and not orphans:  # the account is gone, its grant's group was left
            phases.append(self._identity_phase(phase, "", [], groups))
        if labelled and pid not in referenced:
            phases.append(self._plan_project_phase(project, phase, phases))
        return phases

    def _identity_phase(
        self, phase: PhaseFactory, account: str, keys: list[str], groups: list[str]
    ) -> TeardownPhase:
        deletes: dict[str, Any] = {"service_account_id": account, "access_key_ids": keys, "group_ids": groups}
        if self.options.delete_storage_identity:
            return phase("storage-identity", deletes=deletes)
        return phase(
            "storage-identity",
            status="retained",
            retains={k: v for k, v in deletes.items() if k != "access_key_ids"},
            reason="--delete-storage-identity not given",
        )

    def _plan_project_phase(
        self, project: Project, phase: PhaseFactory, earlier: list[TeardownPhase]
    ) -> TeardownPhase:
        ids = {"project_id": project.id}
        if not self.options.delete_projects:
            return phase("project", status="retained", retains=ids, reason="--delete-projects not given")
        # A labelled project is one the fleet created: the cloud's default network in it goes with it.

        def inventory() -> tuple[list[str], dict[str, str]]:
            topology = default_topology(self.cloud, project.id, _doomed(earlier))
            doomed = _doomed(earlier) | set(topology.values())
            return inventory_except(self.cloud, project.id, doomed), topology

        return decide_project(phase, ids, earlier, inventory)

    # ---------------------------------------------------------------------------------- run

    def run(self, phases: list[TeardownPhase]) -> None:
        for scope in sorted({p.stack for p in phases}):
            mine = [p for p in phases if p.stack == scope]
            for item in mine:
                if item.status != "planned":
                    continue
                if item.phase == "project":
                    blockers = [
                        p.name for p in mine if p.phase != "project" and p.status in UNFINISHED_OUTCOMES
                    ]
                    if blockers:
                        item.status, item.blocked_by = PhaseOutcome.BLOCKED, blockers
                        item.reason = "the project is deleted only after everything in it is"
                        continue
                self._attempt(item)
                if item.phase == "project" and item.status == "done":
                    drop_record(self.name, scope)  # nothing of the project is left to prove

    def _attempt(self, item: TeardownPhase) -> None:
        self.fleet.progress.message(f"cleanup {item.name}: deleting ...")
        try:
            self._delete(item)
        except TeardownRefused as err:  # no longer provably the fleet's: not deleted, never success
            item.status, item.reason = PhaseOutcome.REFUSED, describe(err)
            self.fleet.mark_retry(item, self.retry())
            return
        except (CloudError, NotYetGone) as err:
            item.status, item.reason = PhaseOutcome.FAILED, describe(err)
            self.fleet.mark_retry(item, self.retry())
            return
        item.status = PhaseOutcome.DONE

    def _delete(self, item: TeardownPhase) -> None:
        cloud, deletes = self.cloud, item.deletes
        if item.phase == "network":
            for subnet in deletes.get("subnet_ids", []):
                delete_subnet(cloud, subnet)
            for network in deletes.get("network_ids", []):
                delete_network(cloud, network)
        elif item.phase == "bucket":
            delete_bucket(cloud, self.name, deletes["bucket_id"], self.options.delete_nonempty_buckets)
        elif item.phase == "storage-identity":
            groups = [str(g) for g in deletes.get("group_ids") or []]
            project = self.projects[item.stack].id
            delete_identity(cloud, project, str(deletes["service_account_id"] or ""), self.name, groups)
        elif item.phase == "project":
            project = deletes["project_id"]
            wait_settled(cloud, project)
            topology = default_topology(cloud, project, set())  # re-checked right before deleting
            foreign = inventory_except(cloud, project, set(topology.values()))
            delete_project(cloud, project, foreign, topology, deletes)


def _doomed(phases: list[TeardownPhase]) -> set[str]:
    """Every id the phases delete."""
    doomed: set[str] = set()
    for item in phases:
        for value in item.deletes.values():
            doomed.update(value if isinstance(value, list) else [str(value)])
    return doomed


def run_cleanup(fleet: FleetContext, options: TeardownOptions, dry_run: bool, result: FleetResult) -> None:
    cleanup = Cleanup(fleet, options)
    result.phases = cleanup.plan()
    result.dry_run = dry_run
    # Nothing to delete, and nothing asked for that was refused: nothing to receipt either.
    if dry_run or not any(p.status in ("planned", "refused") for p in result.phases):
        return
    started = time.time()
    path = new_receipt_path(fleet.spec.name, "cleanup")

    def record(outcome: str, retry: str | None = None) -> None:
        document = fleet_receipt(
            fleet, "cleanup", options, result.phases, started, outcome, path, None, retry
        )
        write_receipt(fleet.spec.name, document, path)

    record("running")
    result.receipt, result.receipt_id = str(path), path.stem
    try:
        cleanup.run(result.phases)
    finally:
        if result.partial_cleanup:
            # cleanup finds its candidates by the fleet's labels again: running it again is the retry
            attach_resume(result, cleanup.retry(), fleet.render_retry)
        record(result.outcome, result.resume_command)
