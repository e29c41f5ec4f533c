"""The guarded, stackless phases of a teardown: bucket → storage identity → project, for one project.

They need no Pulumi stack, only the cloud and the proof of ownership (`ProjectEvidence`: the project
stack's outputs, or the teardown record written before that stack was destroyed). That is why a teardown
can be resumed from its receipt without the spec (engine/teardown/resume.py): these phases are what is
left once the stacks are gone.

Each phase is planned read-only (what it would delete or retain, and why) and then run with every guard
checked again right before the delete: the fleet's labels on the live object, a bucket's object count,
and, for the project, that it holds nothing but what this run deletes — the project's provider-made
default network, its default subnet and its default security group included (see `default_topology`).
A project's inventory is every kind the cloud port lists in a project (`_children`): networks, subnets,
security groups, clusters, filesystems, GPU clusters, instances, disks, container registries, buckets,
service accounts and IAM groups.

A phase not asked for (no `--delete-*` flag) is `retained`; one asked for that cannot be proved safe is
`refused` (a partial cleanup: exit 2 and a receipt to continue it), and says why.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from npa_pulumi.cloud.absence import (
    ABSENCE_TIMEOUT_S,
    NotYetGone,
    delete_network,
    delete_subnet,
    found,
    wait_gone,
)
from npa_pulumi.cloud.errors import CloudError, FailedPrecondition, NotFound
from npa_pulumi.cloud.project_defaults import (
    DEFAULT_NETWORK_NAME,
    DEFAULT_SECURITY_GROUP_PREFIX,
    DEFAULT_SUBNET_PREFIX,
)
from npa_pulumi.components.cloud_resources import STORAGE_SERVICE_ACCOUNT
from npa_pulumi.engine.teardown.attestations import attests, read_attestation
from npa_pulumi.output.results import UNFINISHED_OUTCOMES, PhaseOutcome, TeardownPhase

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.engine.teardown.model import ProjectEvidence, TeardownOptions

MANAGED_BY = "npa-pulumi"

PhaseFactory = Callable[..., TeardownPhase]
TOPOLOGY_KEYS = ("default_network_id", "default_subnet_id", "default_security_group_id")
# Kinds a project's clusters may bring with them (their nodes' VMs and disks, the recipe's shared
# filesystem and InfiniBand GPU cluster): judged only once the clusters this run deletes are gone, right
# before the project's delete.
CLUSTER_BORNE = ("instance", "disk", "filesystem", "gpu cluster")


def ours(labels: dict[str, str], fleet: str) -> bool:
    return labels.get("npa-fleet") == fleet and labels.get("managed-by") == MANAGED_BY


def describe(error: Exception) -> str:
    return str(error) or type(error).__name__


def default_topology(cloud: CloudPort, project_id: str, skip: set[str]) -> dict[str, str]:
    """The topology the cloud made along with a project, when the project holds exactly that (besides the
    ids in `skip`, what this run deletes anyway): one `default-network`, one `default-subnet-*` in it, and
    at most one security group in it, the network's provider-marked default `default-security-group-*`.
    Only for a project this fleet provably created: it is part of that project, deleted with it, and
    recorded as such. Anything mixed or additional (a second network, another subnet or a security group
    of someone's in the default network) returns nothing, so all of it counts as someone else's and the
    project is refused."""
    networks = [n for n in cloud.list_networks(project_id) if n.id not in skip]
    subnets = [s for s in cloud.list_subnets(project_id) if s.id not in skip]
    defaults = [n for n in networks if n.name == DEFAULT_NETWORK_NAME and not n.labels.get("npa-fleet")]
    if len(defaults) != 1:
        return {}
    linked = [s for s in subnets if s.network_id == defaults[0].id]
    if len(linked) != 1 or not linked[0].name.startswith(DEFAULT_SUBNET_PREFIX):
        return {}
    topology = {"default_network_id": defaults[0].id, "default_subnet_id": linked[0].id}
    groups = [g for g in cloud.list_security_groups(project_id) if g.network_id == defaults[0].id]
    if not groups:
        return topology  # a cloud (or an older local one) that made none
    [group, *more] = groups
    if more or not group.default or not group.name.startswith(DEFAULT_SECURITY_GROUP_PREFIX):
        return {}
    return {**topology, "default_security_group_id": group.id}


def delete_default_topology(cloud: CloudPort, project_id: str, topology: dict[str, str]) -> None:
    """Subnet first: a network with a subnet cannot be deleted. The default security group goes with its
    network (as on the cloud); where the cloud refuses the network while it still holds that group, the
    group is deleted first and the network again. Already gone counts as deleted."""
    if topology.get("default_subnet_id"):
        delete_subnet(cloud, topology["default_subnet_id"])
    network, group = topology.get("default_network_id"), topology.get("default_security_group_id")
    if network:
        try:
            delete_network(cloud, network)
        except FailedPrecondition:
            if not group:
                raise
            with contextlib.suppress(NotFound):
                cloud.delete_security_group(group)
            delete_network(cloud, network)
    if group:

        def listed() -> bool:
            return any(g.id == group for g in cloud.list_security_groups(project_id))

        wait_gone(listed, f"security group {group}")


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


def _children(cloud: CloudPort, project_id: str, skip_kinds: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    """Everything the project holds, with its kind: every kind the cloud port lists in a project."""
    pid = project_id
    listings: list[tuple[str, Callable[[], list[Any]]]] = [
        ("network", lambda: cloud.list_networks(pid)),
        ("subnet", lambda: cloud.list_subnets(pid)),
        ("security group", lambda: cloud.list_security_groups(pid)),
        ("cluster", lambda: cloud.list_clusters(pid)),
        ("filesystem", lambda: cloud.list_filesystems(pid)),
        ("gpu cluster", lambda: cloud.list_gpu_clusters(pid)),
        ("instance", lambda: cloud.list_instances(pid)),
        ("disk", lambda: cloud.list_disks(pid)),
        ("registry", lambda: cloud.list_registries(pid)),
        ("bucket", lambda: cloud.list_buckets(pid)),
        ("service account", lambda: cloud.list_service_accounts(pid)),
        ("iam group", lambda: cloud.list_groups(pid)),
    ]
    listed: list[tuple[str, Any]] = []
    for kind, listing in listings:
        if kind not in skip_kinds:
            listed += [(kind, obj) for obj in listing()]
    return listed


def inventory_except(
    cloud: CloudPort, project_id: str, ours: set[str], skip_kinds: tuple[str, ...] = ()
) -> list[str]:
    """Everything the project holds, by kind, id and name, but `ours` (what the fleet created and this run
    deletes): what refuses the project's deletion. Ids are unique across kinds, so one set serves all. A
    network's provider-made default security group is part of its network: ours with it, named with it."""
    children = _children(cloud, project_id, skip_kinds)
    networks = {obj.id for kind, obj in children if kind == "network"}

    def part_of_a_network(kind: str, obj: Any) -> bool:
        return kind == "security group" and obj.default and obj.network_id in networks | ours

    return [
        f"{kind} {obj.id} ({obj.name})" if getattr(obj, "name", "") else f"{kind} {obj.id}"
        for kind, obj in children
        if obj.id not in ours and not part_of_a_network(kind, obj)
    ]


def decide_project(
    phase: PhaseFactory,
    ids: dict[str, str],
    earlier: list[TeardownPhase],
    inventory: Callable[[], tuple[list[str], dict[str, str]]],
) -> TeardownPhase:
    """The project phase once the caller's own preconditions (opt-in flag, proof of creation, labels)
    hold: refused while its bucket or storage identity stays, while it holds anything foreign, or while
    what it holds cannot be read (only then is the cloud asked: `inventory` returns the foreign objects and
    the project's default topology); planned otherwise, deleting the project and its default topology."""
    project_id = {"project_id": ids["project_id"]}
    kept = [
        p
        for p in earlier
        if p.status in ("retained", "refused") and p.phase in ("bucket", "storage-identity")
    ]
    if kept:
        what = "; ".join(f"{p.phase} ({p.reason})" for p in kept)
        return phase(
            "project", status="refused", retains=project_id, reason=f"the project still holds: {what}"
        )
    try:
        found, topology = inventory()
    except CloudError as err:
        return phase(
            "project",
            status="refused",
            retains=project_id,
            reason=f"what the project holds could not be read ({describe(err)}): never deleted unproven",
        )
    if found:
        return phase(
            "project",
            status="refused",
            retains={**project_id, "foreign": found},
            reason="the project holds objects this fleet did not create: " + ", ".join(found),
        )
    return phase("project", deletes={**ids, **topology})


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


def fleet_groups(cloud: CloudPort, project_id: str, fleet: str) -> list[str]:
    """The project's IAM groups that carry this fleet's labels: a bucket grant's group, which the cloud
    made with its storage account's labels (CloudPort.grant_bucket_access) and which outlives the account.
    A group without them (a user's, or one granted by an older npa-pulumi) is never the fleet's. Groups
    that cannot be listed are none of the fleet's to delete: the project's own inventory (which then cannot
    be read either) refuses the project."""
    try:
        return [g.id for g in cloud.list_groups(project_id) if ours(g.labels, fleet)]
    except CloudError:
        return []


def delete_identity(
    cloud: CloudPort, project_id: str, account_id: str, fleet: str = "", group_ids: list[str] | None = None
) -> None:
    """Every access key of the account (inventoried now, not as planned), the account, then the fleet's
    grant groups planned with it (each still carrying the fleet's labels: checked right before)."""
    if account_id:
        for key in cloud.list_access_keys(project_id, account_id):
            with contextlib.suppress(NotFound):  # already gone counts as deleted
                cloud.delete_access_key(key.id)
        with contextlib.suppress(NotFound):
            cloud.delete_service_account(account_id)

        def account_listed() -> bool:
            return any(a.id == account_id for a in cloud.list_service_accounts(project_id))

        wait_gone(account_listed, f"service account {account_id}")
    if not group_ids:
        return
    still = {g.id: g for g in cloud.list_groups(project_id)}
    for group_id in group_ids:
        group = still.get(group_id)
        if group is None:
            continue  # already gone
        if not ours(group.labels, fleet):
            raise TeardownRefused(f"IAM group {group_id} no longer carries this fleet's labels")
        with contextlib.suppress(NotFound):
            cloud.delete_group(group_id)

    def groups_listed() -> bool:
        return any(g.id in group_ids for g in cloud.list_groups(project_id))

    wait_gone(groups_listed, f"IAM group(s) {', '.join(group_ids)}")


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
    delete_default_topology(cloud, project_id, topology)
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
        retry: Callable[[TeardownPhase, str], object],
    ) -> None:
        self.cloud = cloud
        self.fleet = fleet
        self.options = options
        self.say = say
        self.retry = retry  # (phase, project key): puts the retry of a failed phase on it (engine/retries.py)
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
                status="refused",
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
                status="refused",
                retains=ids,
                reason=f"bucket {ev.bucket_id} does not carry this fleet's labels: never deleted",
            )
        count = self.cloud.count_bucket_objects(ev.bucket_id)
        if count and not self.options.delete_nonempty_buckets:
            return phase(
                "bucket",
                status="refused",
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
                reason="the storage service account, its access keys and its grant's IAM group are "
                "retained unless --delete-storage-identity",
            )
        attestation = read_attestation(self.fleet, ev.project_stack)
        attested = not ev.service_account_created and attests(attestation, ev)
        if not ev.service_account_created and not attested:
            return phase(
                "storage-identity",
                status="refused",
                retains=ids,
                reason="no durable record that this fleet created the service account: never deleted (an "
                "account npa created without that record: `npa-pulumi reconcile storage-account --spec F "
                f"--project {ev.project_key} --id {ev.service_account_id} --reason ... "
                "--attest-npa-created`)",
            )
        if attested and attestation is not None:
            ids["attestation"] = asdict(attestation)  # the receipt records the evidence it was deleted on
        accounts = [
            a for a in self.cloud.list_service_accounts(ev.project_id) if a.id == ev.service_account_id
        ]
        if attested and accounts and accounts[0].name != STORAGE_SERVICE_ACCOUNT:
            return phase(
                "storage-identity",
                status="refused",
                retains=ids,
                reason=f"service account {ev.service_account_id} is no longer named "
                f"{STORAGE_SERVICE_ACCOUNT!r}",
            )
        # An attested account (found by name, not created by this fleet) never carried its labels.
        if accounts and not attested and not ours(accounts[0].labels, self.fleet):
            return phase(
                "storage-identity",
                status="refused",
                retains=ids,
                reason="the service account does not carry this fleet's labels: never deleted",
            )
        groups = fleet_groups(self.cloud, ev.project_id, self.fleet)
        if not accounts and not groups:
            return phase(
                "storage-identity", status="absent", reason=f"service account {ev.service_account_id} is gone"
            )
        keys = (
            [k.id for k in self.cloud.list_access_keys(ev.project_id, ev.service_account_id)]
            if accounts
            else []
        )
        deletes = {**ids, "access_key_ids": keys, "group_ids": groups}
        if not accounts:  # gone, but its grant's group was left (an interrupted teardown)
            deletes["service_account_id"] = ""
        return phase("storage-identity", deletes=deletes)

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
        if ev.project_declared and not ev.project_created:
            return phase(
                "project",
                status="retained",
                retains=ids,
                reason="the spec names this project by id: it is used, never deleted (--delete-projects "
                "deletes only projects the fleet created)",
            )
        if not ev.project_created:
            return phase(
                "project",
                status="refused",
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
                status="refused",
                retains=ids,
                reason="the project does not carry this fleet's labels: never deleted",
            )
        doomed = [p for p in earlier if p.status == "planned"]
        return decide_project(phase, ids, earlier, lambda: self._plan_inventory(ev, doomed))

    def _plan_inventory(
        self, ev: ProjectEvidence, doomed: list[TeardownPhase]
    ) -> tuple[list[str], dict[str, str]]:
        """What the project holds that this run does not delete, and its default topology (which goes
        with it, and the receipt says so). A project whose clusters this run deletes has its instances,
        disks, filesystems and GPU clusters judged only once those clusters are gone (`CLUSTER_BORNE`),
        right before its delete."""
        topology = self.topology(ev)
        extra = {v for p in doomed for v in _deleted_ids(p)}
        skip = CLUSTER_BORNE if self._loses_clusters(ev) else ()
        return self.foreign_objects(ev, topology=topology, also=extra, skip_kinds=skip), topology

    def _loses_clusters(self, ev: ProjectEvidence) -> bool:
        return bool(self.doomed_clusters) and any(
            c.id in self.doomed_clusters for c in self.cloud.list_clusters(ev.project_id)
        )

    def topology(self, ev: ProjectEvidence, after_teardown: bool = False) -> dict[str, str]:
        """The project's default topology (`default_topology`); only of a project the fleet created."""
        if not ev.project_created:
            return {}
        owned = {ev.network_id, ev.subnet_id} if ev.network_owned and not after_teardown else set()
        return default_topology(self.cloud, ev.project_id, owned)

    def foreign_objects(
        self,
        ev: ProjectEvidence,
        after_teardown: bool = False,
        topology: dict[str, str] | None = None,
        also: set[str] | None = None,
        skip_kinds: tuple[str, ...] = (),
    ) -> list[str]:
        """What the project holds that this fleet did not create (and will not delete in this run)."""
        ours_ids = set((topology or {}).values()) | (also or set())
        if not after_teardown:
            ours_ids |= {ev.bucket_id, ev.service_account_id} | self.doomed_clusters
            if ev.network_owned:
                ours_ids |= {ev.network_id, ev.subnet_id}
        return inventory_except(self.cloud, ev.project_id, ours_ids - {""}, skip_kinds)

    # ---------------------------------------------------------------------------------- run

    def run(self, ev: ProjectEvidence, project_key: str, phases: list[TeardownPhase]) -> None:
        """Run the project's planned stackless phases in order; the project waits for everything else."""
        for item in phases:
            if item.status != "planned":
                continue
            if item.phase == "bucket":
                self._attempt(item, project_key, lambda: self._delete_bucket(ev))
            elif item.phase == "storage-identity":
                self._attempt(item, project_key, functools.partial(self._delete_identity, ev, item.deletes))
            elif item.phase == "project":
                blockers = [
                    p.name for p in phases if p.phase != "project" and p.status in UNFINISHED_OUTCOMES
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
        except TeardownRefused as err:  # no longer provably the fleet's: not deleted, never success
            item.status, item.reason = PhaseOutcome.REFUSED, describe(err)
            self.retry(item, project_key)
            self.say(f"{item.name}: refused: {item.reason}")
            return
        except (CloudError, NotYetGone) as err:
            item.status, item.reason = PhaseOutcome.FAILED, describe(err)
            self.retry(item, project_key)
            self.say(f"{item.name}: failed: {item.reason}")
            return
        item.status = PhaseOutcome.DONE

    def _delete_bucket(self, ev: ProjectEvidence) -> None:
        delete_bucket(self.cloud, self.fleet, ev.bucket_id, self.options.delete_nonempty_buckets)

    def _delete_identity(self, ev: ProjectEvidence, planned: dict[str, Any]) -> None:
        account = str(planned.get("service_account_id") or "")
        groups = [str(g) for g in planned.get("group_ids") or []]
        delete_identity(self.cloud, ev.project_id, account, self.fleet, groups)

    def _delete_project(self, ev: ProjectEvidence, planned: dict[str, Any]) -> None:
        wait_settled(self.cloud, ev.project_id)
        topology = self.topology(ev, after_teardown=True)  # re-checked right before deleting
        foreign = self.foreign_objects(ev, after_teardown=True, topology=topology)
        delete_project(self.cloud, ev.project_id, foreign, topology, planned)


def _deleted_ids(item: TeardownPhase) -> list[str]:
    """Every id a phase deletes (what is not "something else" in its project)."""
    found: list[str] = []
    for value in item.deletes.values():
        if isinstance(value, list):
            found.extend(str(v) for v in value)
        else:
            found.append(str(value))
    return found
