"""The guarded, stackless phases of a teardown: bucket → storage identity → project, for one project.

They need no Pulumi stack, only the cloud and the proof of ownership (`ProjectEvidence`: the project
stack's outputs, or the teardown record written before that stack was destroyed). That is why a teardown
can be resumed from its receipt without the spec (engine/teardown/resume.py): these phases are what is
left once the stacks are gone.

Each phase is planned read-only (what it would delete or retain, and why) and then run with every guard
checked again right before the delete: the fleet's labels on the live object, a bucket's object count,
and, for the project, that it holds nothing but what this run deletes — the project's provider-made
default network included (see `default_topology`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from npa_pulumi.cloud.absence import (
    ABSENCE_TIMEOUT_S,
    NotYetGone,
    delete_network,
    delete_subnet,
    found,
    wait_gone,
)
from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.cloud.project_defaults import DEFAULT_NETWORK_NAME, DEFAULT_SUBNET_PREFIX
from npa_pulumi.output.results import PhaseOutcome, TeardownPhase

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.engine.teardown.model import ProjectEvidence, TeardownOptions

MANAGED_BY = "npa-pulumi"

PhaseFactory = Callable[..., TeardownPhase]
TOPOLOGY_KEYS = ("default_network_id", "default_subnet_id")


def ours(labels: dict[str, str], fleet: str) -> bool:
    return labels.get("npa-fleet") == fleet and labels.get("managed-by") == MANAGED_BY


def describe(error: Exception) -> str:
    return str(error) or type(error).__name__


def default_topology(cloud: CloudPort, project_id: str, skip: set[str]) -> dict[str, str]:
    """The topology the cloud made along with a project, when the project holds exactly that (besides the
    ids in `skip`, what this run deletes anyway): one `default-network` and one `default-subnet-*` in it.
    Only for a project this fleet provably created: it is part of that project, deleted with it, and
    recorded as such. Anything mixed or additional (a second network, another subnet in the default
    network) returns nothing, so all of it counts as someone else's and the project is refused."""
    networks = [n for n in cloud.list_networks(project_id) if n.id not in skip]
    subnets = [s for s in cloud.list_subnets(project_id) if s.id not in skip]
    defaults = [n for n in networks if n.name == DEFAULT_NETWORK_NAME and not n.labels.get("npa-fleet")]
    if len(defaults) != 1:
        return {}
    linked = [s for s in subnets if s.network_id == defaults[0].id]
    if len(linked) != 1 or not linked[0].name.startswith(DEFAULT_SUBNET_PREFIX):
        return {}
    return {"default_network_id": defaults[0].id, "default_subnet_id": linked[0].id}


def delete_default_topology(cloud: CloudPort, topology: dict[str, str]) -> None:
    """Subnet first: a network with a subnet cannot be deleted. Already gone counts as deleted."""
    if topology.get("default_subnet_id"):
        delete_subnet(cloud, topology["default_subnet_id"])
    if topology.get("default_network_id"):
        delete_network(cloud, topology["default_network_id"])


def wait_settled(cloud: CloudPort, project_id: str, timeout_s: float = ABSENCE_TIMEOUT_S) -> None:
    """Until nothing in the project is still DELETING (e.g. the network its project stack's destroy just
    deleted): what the project holds is judged on what stays, not on what is on its way out."""

    def deleting() -> bool:
        return any(getattr(obj, "state", "") == "DELETING" for _kind, obj in _children(cloud, project_id))

    wait_gone(deleting, f"what project {project_id} is still deleting", timeout_s)


class TeardownRefused(Exception):
    """A guard found, right before deleting, that the object is no longer provably the fleet's."""


def phase_factory(project_key: str, stack: str) -> PhaseFactory:
    """The phases of one project scope (a project stack, or cleanup's per-project scope)."""

    def phase(kind: str, **values: Any) -> TeardownPhase:
        return TeardownPhase(phase=kind, project_key=project_key, stack=stack, **values)

    return phase


def _children(cloud: CloudPort, project_id: str) -> list[tuple[str, Any]]:
    """Everything the project holds, with its kind."""
    pid = project_id
    listed: list[tuple[str, Any]] = [("network", n) for n in cloud.list_networks(pid)]
    listed += [("subnet", s) for s in cloud.list_subnets(pid)]
    listed += [("cluster", c) for c in cloud.list_clusters(pid)]
    listed += [("filesystem", f) for f in cloud.list_filesystems(pid)]
    listed += [("gpu cluster", g) for g in cloud.list_gpu_clusters(pid)]
    listed += [("bucket", b) for b in cloud.list_buckets(pid)]
    listed += [("service account", a) for a in cloud.list_service_accounts(pid)]
    return listed


def inventory_except(cloud: CloudPort, project_id: str, ours: set[str]) -> list[str]:
    """Everything the project holds, by kind and id, but `ours` (what the fleet created and this run
    deletes): what refuses the project's deletion. Ids are unique across kinds, so one set serves all."""
    return [f"{kind} {obj.id}" for kind, obj in _children(cloud, project_id) if obj.id not in ours]


def decide_project(
    phase: PhaseFactory, ids: dict[str, str], earlier: list[TeardownPhase], foreign: Callable[[], list[str]]
) -> TeardownPhase:
    """The project phase once the caller's own preconditions (opt-in flag, proof of creation, labels)
    hold: retained while its bucket or storage identity stays, or while it holds anything foreign (only
    then is the cloud asked); planned otherwise, deleting `ids` (the project, and its default topology)."""
    project_id = {"project_id": ids["project_id"]}
    kept = [p for p in earlier if p.status == "retained" and p.phase in ("bucket", "storage-identity")]
    if kept:
        what = "; ".join(f"{p.phase} ({p.reason})" for p in kept)
        return phase(
            "project", status="retained", retains=project_id, reason=f"the project still holds: {what}"
        )
    found = foreign()
    if found:
        return phase(
            "project",
            status="retained",
            retains={**project_id, "foreign": found},
            reason="the project holds objects this fleet did not create: " + ", ".join(found),
        )
    return phase("project", deletes=ids)


def delete_bucket(cloud: CloudPort, fleet: str, bucket_id: str, allow_nonempty: bool) -> None:
    """Every guard again right before the delete: the fleet's labels, and (unless allowed) no objects."""
    bucket = cloud.get_bucket(bucket_id)
    if not ours(bucket.labels, fleet):
        raise TeardownRefused(f"bucket {bucket_id} does not carry this fleet's labels")
    count = cloud.count_bucket_objects(bucket_id)
    if count and not allow_nonempty:
        raise TeardownRefused(f"bucket {bucket_id} now holds {count} object(s)")
    cloud.delete_bucket(bucket_id)
    wait_gone(found(lambda: cloud.get_bucket(bucket_id)), f"bucket {bucket_id}")


def delete_identity(cloud: CloudPort, project_id: str, account_id: str) -> None:
    """Every access key of the account (inventoried now, not as planned), then the account."""
    for key in cloud.list_access_keys(project_id, account_id):
        with contextlib.suppress(NotFound):  # already gone counts as deleted
            cloud.delete_access_key(key.id)
    with contextlib.suppress(NotFound):
        cloud.delete_service_account(account_id)

    def account_listed() -> bool:
        return any(a.id == account_id for a in cloud.list_service_accounts(project_id))

    wait_gone(account_listed, f"service account {account_id}")


def delete_project(
    cloud: CloudPort,
    project_id: str,
    foreign: list[str],
    topology: dict[str, str],
    planned: dict[str, Any],
) -> None:
    """The project, after its default topology; refused while it holds anything foreign, or when its default
    topology is no longer the one planned (and shown, and receipted): only those exact ids are deleted."""
    if foreign:
        raise TeardownRefused(f"project {project_id} still holds: {', '.join(foreign)}")
    if topology != {key: planned[key] for key in TOPOLOGY_KEYS if planned.get(key)}:
        raise TeardownRefused(f"project {project_id}: its default network changed since it was planned")
    delete_default_topology(cloud, topology)
    cloud.delete_project(project_id)
    wait_gone(found(lambda: cloud.get_project(project_id)), f"project {project_id}")


class GuardedPhases:
    """Plans and runs the bucket, storage-identity and project phases of one project."""

    def __init__(
        self,
        cloud: CloudPort,
        fleet: str,
        options: TeardownOptions,
        say: Callable[[str], None],
        retry: Callable[[str], str],
    ) -> None:
        self.cloud = cloud
        self.fleet = fleet
        self.options = options
        self.say = say
        self.retry = retry  # project key -> the exact command that retries a failed phase
        self.doomed_clusters: set[str] = set()  # clusters this run deletes: not "something else"

    # ---------------------------------------------------------------------------------- plan

    def plan(
        self, ev: ProjectEvidence, phase: PhaseFactory, earlier: list[TeardownPhase]
    ) -> list[TeardownPhase]:
        """The project's stackless phases, after `earlier` (its network phase)."""
        phases: list[TeardownPhase] = []
        if ev.bucket_id:
            phases.append(self.plan_bucket(ev, phase))
        if ev.service_account_id:
            phases.append(self.plan_identity(ev, phase))
        phases.append(self.plan_project(ev, phase, [*earlier, *phases]))
        return phases

    def plan_bucket(self, ev: ProjectEvidence, phase: PhaseFactory) -> TeardownPhase:
        ids = {"bucket_id": ev.bucket_id, "bucket_name": ev.bucket_name}
        if not self.options.delete_buckets:
            return phase(
                "bucket",
                status="retained",
                retains=ids,
                reason="buckets are retained unless --delete-buckets",
            )
        if not ev.bucket_created:
            return phase(
                "bucket",
                status="retained",
                retains=ids,
                reason="no durable record that this fleet created the bucket (it existed before, or was "
                "recorded by an older npa-pulumi): never deleted",
            )
        try:
            bucket = self.cloud.get_bucket(ev.bucket_id)
        except NotFound:
            return phase("bucket", status="absent", reason=f"bucket {ev.bucket_id} is already gone")
        if not ours(bucket.labels, self.fleet):
            return phase(
                "bucket",
                status="retained",
                retains=ids,
                reason=f"bucket {ev.bucket_id} does not carry this fleet's labels: never deleted",
            )
        count = self.cloud.count_bucket_objects(ev.bucket_id)
        if count and not self.options.delete_nonempty_buckets:
            return phase(
                "bucket",
                status="retained",
                retains={**ids, "objects": count},
                reason=f"bucket holds {count} object(s): refused unless --delete-nonempty-buckets",
            )
        return phase("bucket", deletes={**ids, "objects": count})

    def plan_identity(self, ev: ProjectEvidence, phase: PhaseFactory) -> TeardownPhase:
        ids: dict[str, Any] = {"service_account_id": ev.service_account_id}
        if not self.options.delete_storage_identity:
            return phase(
                "storage-identity",
                status="retained",
                retains=ids,
                reason="the storage service account and its access keys are retained unless "
                "--delete-storage-identity",
            )
        if not ev.service_account_created:
            return phase(
                "storage-identity",
                status="retained",
                retains=ids,
                reason="no durable record that this fleet created the service account: never deleted",
            )
        accounts = [
            a for a in self.cloud.list_service_accounts(ev.project_id) if a.id == ev.service_account_id
        ]
        if not accounts:
            return phase(
                "storage-identity", status="absent", reason=f"service account {ev.service_account_id} is gone"
            )
        if not ours(accounts[0].labels, self.fleet):
            return phase(
                "storage-identity",
                status="retained",
                retains=ids,
                reason="the service account does not carry this fleet's labels: never deleted",
            )
        keys = [k.id for k in self.cloud.list_access_keys(ev.project_id, ev.service_account_id)]
        return phase("storage-identity", deletes={**ids, "access_key_ids": keys})

    def plan_project(
        self, ev: ProjectEvidence, phase: PhaseFactory, earlier: list[TeardownPhase]
    ) -> TeardownPhase:
        ids = {"project_id": ev.project_id}
        if not self.options.delete_projects:
            return phase(
                "project",
                status="retained",
                retains=ids,
                reason="projects are retained unless --delete-projects",
            )
        if not ev.project_created:
            return phase(
                "project",
                status="retained",
                retains=ids,
                reason="no durable record that this fleet created the project (it existed before): "
                "never deleted",
            )
        try:
            project = self.cloud.get_project(ev.project_id)
        except NotFound:
            return phase("project", status="absent", reason=f"project {ev.project_id} is already gone")
        if not ours(project.labels, self.fleet):
            return phase(
                "project",
                status="retained",
                retains=ids,
                reason="the project does not carry this fleet's labels: never deleted",
            )
        topology = self.topology(ev)
        # The cloud's default network of the project goes with it, and the receipt says so.
        return decide_project(
            phase, {**ids, **topology}, earlier, lambda: self.foreign_objects(ev, topology=topology)
        )

    def topology(self, ev: ProjectEvidence, after_teardown: bool = False) -> dict[str, str]:
        """The project's default topology (`default_topology`); only of a project the fleet created."""
        if not ev.project_created:
            return {}
        owned = {ev.network_id, ev.subnet_id} if ev.network_owned and not after_teardown else set()
        return default_topology(self.cloud, ev.project_id, owned)

    def foreign_objects(
        self, ev: ProjectEvidence, after_teardown: bool = False, topology: dict[str, str] | None = None
    ) -> list[str]:
        """What the project holds that this fleet did not create (and will not delete in this run)."""
        ours_ids = set((topology or {}).values())
        if not after_teardown:
            ours_ids |= {ev.bucket_id, ev.service_account_id} | self.doomed_clusters
            if ev.network_owned:
                ours_ids |= {ev.network_id, ev.subnet_id}
        return inventory_except(self.cloud, ev.project_id, ours_ids - {""})

    # ---------------------------------------------------------------------------------- run

    def run(self, ev: ProjectEvidence, project_key: str, phases: list[TeardownPhase]) -> None:
        """Run the project's planned stackless phases in order; the project waits for everything else."""
        for item in phases:
            if item.status != "planned":
                continue
            if item.phase == "bucket":
                self._attempt(item, project_key, lambda: self._delete_bucket(ev))
            elif item.phase == "storage-identity":
                self._attempt(item, project_key, lambda: self._delete_identity(ev))
            elif item.phase == "project":
                blockers = [
                    p.name for p in phases if p.phase != "project" and p.status in ("failed", "blocked")
                ]
                if blockers:
                    item.status, item.blocked_by = PhaseOutcome.BLOCKED, blockers
                    item.reason = "the project is deleted only after everything in it is"
                else:
                    self._attempt(
                        item, project_key, functools.partial(self._delete_project, ev, item.deletes)
                    )

    def _attempt(self, item: TeardownPhase, project_key: str, action: Callable[[], None]) -> None:
        self.say(f"{item.name}: deleting ...")
        try:
            action()
        except (CloudError, TeardownRefused, NotYetGone) as err:
            item.status, item.reason = PhaseOutcome.FAILED, describe(err)
            item.retry_command = self.retry(project_key)
            self.say(f"{item.name}: failed: {item.reason}")
            return
        item.status = PhaseOutcome.DONE

    def _delete_bucket(self, ev: ProjectEvidence) -> None:
        delete_bucket(self.cloud, self.fleet, ev.bucket_id, self.options.delete_nonempty_buckets)

    def _delete_identity(self, ev: ProjectEvidence) -> None:
        delete_identity(self.cloud, ev.project_id, ev.service_account_id)

    def _delete_project(self, ev: ProjectEvidence, planned: dict[str, Any]) -> None:
        wait_settled(self.cloud, ev.project_id)
        topology = self.topology(ev, after_teardown=True)  # re-checked right before deleting
        foreign = self.foreign_objects(ev, after_teardown=True, topology=topology)
        delete_project(self.cloud, ev.project_id, foreign, topology, planned)
