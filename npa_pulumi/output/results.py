"""What a fleet operation reports: one entry per stack, totals, and the JSON/text forms of both."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PlainSerializer

from npa_pulumi.spec.constants import BackendKind
from npa_pulumi.spec.types import Backend

StackKind = Literal["project", "cluster"]


class StackStatus(StrEnum):
    """A stack's outcome (`StackResult.status`; JSON carries the value), by command."""

    # up
    DEPLOYED = "deployed"
    UNCHANGED = "unchanged"
    FAILED = "failed"
    SKIPPED = "skipped"
    # A backend this version cannot deploy: a failure, exit 1 (preview, status and destroy list such a
    # target as not-supported).
    NOT_DEPLOYABLE = "not-deployable"
    # A staged rollout did not start it: maintenance or a NebiusGPUError node (not a failure).
    HELD = "held"
    # A deployed cluster whose disruptive changes may not start now (outside its maintenance windows, or
    # under an exclusion): its stack is not updated (plan/deferral.py). Not a failure.
    PENDING = "pending"
    # The gate did not pass (everything is kept for a retry), no kubeconfig could be had, or a MIG
    # cluster's layout did not converge (kept likewise).
    DEPLOYED_VALIDATION_FAILED = "deployed-validation-failed"
    DEPLOYED_CREDENTIALS_FAILED = "deployed-credentials-failed"
    DEPLOYED_MIG_NOT_READY = "deployed-mig-not-ready"
    # preview
    CHANGES = "changes"
    NO_CHANGES = "no-changes"
    NOT_SUPPORTED = "not-supported"
    # destroy (per phase: PhaseOutcome)
    DESTROYED = "destroyed"
    ABSENT = "absent"
    DESTROY_INCOMPLETE = "destroy-incomplete"
    RETAINED = "retained"
    # status: deployed | provisioning | failed | destroyed | drifted | absent | unknown | status-error, the
    # failed lifecycles above, destroy-incomplete after a failed destroy, and while an `up` runs elsewhere
    # its running state (engine/lifecycle.py)
    PROVISIONING = "provisioning"
    DRIFTED = "drifted"
    UNKNOWN = "unknown"
    STATUS_ERROR = "status-error"
    VALIDATING_GPU_HEALTH = "validating-gpu-health"
    VALIDATING_MIG = "validating-mig"
    VALIDATING_CLUSTER_BASICS = "validating-cluster-basics"
    VALIDATING_FABRIC = "validating-fabric"
    VALIDATING_KUBERAY = "validating-kuberay"
    VALIDATING_SLURM = "validating-slurm"
    # refresh: in-sync | drifted | absent | failed
    IN_SYNC = "in-sync"
    # verify-mig / verify-graphics / verify-storage / verify-fabric: ready | not-ready | failed | skipped
    READY = "ready"
    NOT_READY = "not-ready"
    # adopt: what was found for a selected cluster (engine/operations/adopt.py Verdict), then up's
    FOUND = "found"
    NOT_FOUND = "not-found"
    MISMATCHED = "mismatched"
    ALREADY_ADOPTED = "already-adopted"
    REFUSED = "refused"
    # A rollout's wave barrier that let the next wave start (engine/rollout.py; never in a result).
    PASSED = "passed"


# The stack status, as it dumps: its plain value (JSON and every dump read as before the enum).
Status = Annotated[StackStatus, PlainSerializer(lambda status: status.value, return_type=str)]

FAILED_LIFECYCLES = (
    StackStatus.DEPLOYED_VALIDATION_FAILED,
    StackStatus.DEPLOYED_MIG_NOT_READY,
    StackStatus.DEPLOYED_CREDENTIALS_FAILED,
)
FAILED_STATUSES = {
    StackStatus.FAILED,
    StackStatus.DESTROY_INCOMPLETE,
    StackStatus.STATUS_ERROR,
    StackStatus.NOT_READY,
    StackStatus.NOT_DEPLOYABLE,
    # adopt: a selected cluster that cannot be taken over as the spec stands (nothing is adopted)
    StackStatus.NOT_FOUND,
    StackStatus.MISMATCHED,
    StackStatus.REFUSED,
    *FAILED_LIFECYCLES,
}


class PolicyViolation(BaseModel):
    policy: str
    pack: str = ""
    level: str  # mandatory | advisory | remediate
    message: str
    resource: str = ""


class StackResult(BaseModel):
    stack: str
    kind: StackKind
    project_key: str
    project_id: str | None = None
    cluster_name: str | None = None
    status: Status
    changes: dict[str, int] = Field(default_factory=dict)
    diff: list[dict[str, Any]] = Field(default_factory=list)
    policy: list[PolicyViolation] = Field(default_factory=list)
    cluster_id: str | None = None
    kube_context: str | None = None
    kubeconfig: str | None = None
    validation: str | None = None
    health: dict[str, Any] | None = None  # the health gate's evidence (nothing secret in it)
    # A KubeRay cluster's Ray readiness: ready, ready_workers, desired_workers, head_ready, missing
    # (`status` reads it live from the cluster; `up` from its gate).
    kuberay: dict[str, Any] | None = None
    node_groups: list[dict[str, Any]] = Field(default_factory=list)
    # status / refresh: objects deleted or changed outside the fleet, [{address, kind, id, reason}]
    drift: list[dict[str, str]] = Field(default_factory=list)
    # preview: Terraform's own plan for the cluster (npa_pulumi/bridge/plan_summary.py): {add, change,
    # destroy, replace, resources: [{address, action, kind, destructive, attributes}]}, or {error} / {skipped}
    terraform: dict[str, Any] | None = None
    # preview: the stack's changes classed `{class: disruptive | in-place | none, reasons: [{resource,
    # class, reason}]}` from its diff and Terraform's plan (bridge/plan_summary.stack_disruption).
    disruption: dict[str, Any] | None = None
    # up: a `pending` cluster's held changes (plan/deferral.py Deferral.to_dict): {reason, inside_window,
    # next_window, exclusions: [{scope, until, reason}], changes: [{resource, reason, held_by}]}
    pending: dict[str, Any] | None = None
    # status: the Kubernetes versions the cloud reports, {control_plane, node_groups: {name: version}}
    versions: dict[str, Any] | None = None
    outputs: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    retry_command: str | None = None
    # The retry as the engine made it (an engine `Retry`: the operation and its request, beside the text of
    # `retry_command`); None when read back from stored state. Never in the JSON document.
    retry: Any = Field(default=None, exclude=True, repr=False)
    elapsed_s: float = 0.0
    log_file: str | None = None
    locked: bool = False  # failed because another run holds the stack's lock (the error names it)
    # Cluster stacks: the target's backend (mk8s | soperator), and a soperator cluster's native Slurm status
    # ({name, namespace, phase, conditions, nodesets: {name: {phase, desired, replicas, ready}},
    # login_endpoint, source: live | gate}).
    backend: Backend | None = None
    slurm: dict[str, Any] | None = None
    # adopt: what was found in the original's install and taken over ({verdict, source, cluster_id,
    # node_group_ids, project_id, subnet_id, network_id, network_owned, original_status, digests,
    # reasons}); ids, paths and digests only
    adoption: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES


class PhaseName(StrEnum):
    """The phases of a teardown, in the order they run for one project."""

    CLUSTER = "cluster"
    NETWORK = "network"
    BUCKET = "bucket"
    STORAGE_IDENTITY = "storage-identity"
    PROJECT = "project"


class PhaseOutcome(StrEnum):
    """How a teardown phase ended (or, in a dry run, that it is planned)."""

    PLANNED = "planned"
    DONE = "done"
    ABSENT = "absent"  # nothing there: repeat-safe
    RETAINED = "retained"  # kept, not asked to delete (or not this run's to delete): the reason says which
    # Asked to delete (--delete-buckets, --delete-storage-identity, --delete-projects, a cleanup) but not
    # proved safe to: no durable record of creation, the fleet's labels gone, a bucket that holds objects, a
    # project that holds anything else or whose inventory could not be read; or a guard that failed right
    # before the delete. Never success: a partial cleanup (exit 2), continued from its receipt.
    REFUSED = "refused"
    BLOCKED = "blocked"  # by another phase (blocked_by)
    FAILED = "failed"  # with the reason and the exact retry command


# The outcomes that leave something a teardown was asked to delete: a partial cleanup.
UNFINISHED_OUTCOMES = frozenset({PhaseOutcome.REFUSED, PhaseOutcome.BLOCKED, PhaseOutcome.FAILED})


class DrainFailure(StrEnum):
    """Why a cluster's drain could not run (or stopped): each asks for a different fix. The cluster's
    destroy is attempted whatever the drain's failure."""

    KUBECONFIG = "kubeconfig"  # no saved kubeconfig, or one that cannot be used (malformed, plugin missing)
    AUTHENTICATION = "authentication"  # the API server did not accept the credentials (401, plugin failed)
    RBAC = "rbac"  # authenticated, but not allowed (403)
    API = "api"  # the API server unreachable, timing out or failing (5xx, an unexpected answer)
    IDENTITY = "identity"  # the saved kubeconfig is not provably this cluster's: nothing in it was touched


class DrainStatus(StrEnum):
    PREVIEWED = "previewed"  # dry run (and the plan a destroy confirms): read only
    DRAINED = "drained"  # every evictable pod evicted and gone
    INCOMPLETE = "incomplete"  # some pods stayed (a PodDisruptionBudget refused, or they did not go in time)
    SKIPPED = "skipped"  # not run: `failure` says why (the destroy goes on)
    FAILED = "failed"  # stopped part-way: `failure` says why (the destroy goes on)
    NOT_APPLICABLE = "not-applicable"  # no Kubernetes API to drain (a local cloud that runs none)


class PdbRelaxation(StrEnum):
    NOT_NEEDED = "not-needed"  # no system PodDisruptionBudget blocked an eviction
    RELAXED = "relaxed"  # removed for the destroy (snapshots kept); restored if the destroy aborts
    GONE_WITH_CLUSTER = "gone-with-cluster"  # relaxed, and the cluster was deleted with them
    RESTORED = "restored"  # the destroy aborted while the cluster existed: put back from the snapshots
    RESTORE_FAILED = "restore-failed"  # ... and putting one back failed (`reason`; the snapshot stays here)


class BlockingPdb(BaseModel):
    """A PodDisruptionBudget that would stop (or stopped) the drain: more of its pods sit on nodes that go
    than it allows to be disrupted, and no node that stays can take a replacement."""

    namespace: str
    name: str
    system: bool  # one of the four kube-system PDBs of the managed cluster's own workloads
    disruptions_allowed: int
    pods: list[str] = Field(default_factory=list)  # namespace/name (node) of the pods it protects there
    relaxable: bool = False  # a system PDB this destroy may remove for the drain (and restore on abort)
    why: str = ""


class PdbSnapshot(BaseModel):
    """A removed system PodDisruptionBudget, exactly enough to put it back: labels, annotations, spec."""

    namespace: str
    name: str
    uid: str
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    spec: dict[str, Any] = Field(default_factory=dict)
    restored: bool = False


class ClusterDrain(BaseModel):
    """A cluster phase's drain (engine/teardown/drain.py): the eviction preview of a dry run, or what a
    destroy evicted, what refused, and the system PodDisruptionBudgets it relaxed and restored. Names and
    counts, never a credential."""

    status: DrainStatus
    context: str = ""
    failure: DrainFailure | None = None
    message: str | None = None
    nodes: int = 0
    evictable_pods: int = 0
    blocking: list[BlockingPdb] = Field(default_factory=list)
    cordoned: list[str] = Field(default_factory=list)
    uncordoned: list[str] = Field(default_factory=list)
    evicted: list[str] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list)  # "namespace/pod: why" (the PDB, or the API's answer)
    relaxation: PdbRelaxation = PdbRelaxation.NOT_NEEDED
    relaxation_reason: str | None = None
    relaxed: list[PdbSnapshot] = Field(default_factory=list)


def drain_lines(name: str, drain: ClusterDrain) -> list[str]:
    """A cluster phase's drain in a few lines of text (the teardown table's and the confirmation's)."""
    head = f"drain of {name}"
    if drain.context:
        head += f" (context {drain.context})"
    state = drain.status.value + (f" ({drain.failure.value})" if drain.failure else "")
    if drain.status in (DrainStatus.SKIPPED, DrainStatus.FAILED, DrainStatus.NOT_APPLICABLE):
        lines = [f"{head}: {state}: {drain.message or ''}".rstrip(": ")]
    elif drain.status == DrainStatus.PREVIEWED:
        lines = [f"{head}: {state}: {drain.nodes} node(s), {drain.evictable_pods} pod(s) to evict"]
    else:
        lines = [
            f"{head}: {state}: {len(drain.evicted)} pod(s) evicted, {len(drain.cordoned)} node(s) cordoned"
        ]
    verb = "would block" if drain.status == DrainStatus.PREVIEWED else "blocked"
    for pdb in drain.blocking:
        kind = "system, relaxable" if pdb.relaxable else ("system" if pdb.system else "user, never relaxed")
        pods = ", ".join(pdb.pods)
        lines.append(
            f"  {verb}: PodDisruptionBudget {pdb.namespace}/{pdb.name} [{kind}] allows "
            f"{pdb.disruptions_allowed} disruption(s); pods no other node can take: {pods}"
        )
    lines += [f"  stayed: {refusal}" for refusal in drain.refused]
    if drain.relaxed or drain.relaxation != PdbRelaxation.NOT_NEEDED:
        names = ", ".join(f"{s.namespace}/{s.name}" for s in drain.relaxed) or "none"
        why = f": {drain.relaxation_reason}" if drain.relaxation_reason else ""
        lines.append(f"  system PodDisruptionBudgets {drain.relaxation.value} ({names}){why}")
    return lines


class TeardownPhase(BaseModel):
    """One phase of a teardown (engine/teardown/run.py): what it deletes or retains, and how it ended.
    Ids and reasons only, never a secret: phases go into receipts as they are."""

    phase: PhaseName
    project_key: str
    stack: str  # the cluster stack, or the project stack for project-scoped phases
    status: PhaseOutcome = PhaseOutcome.PLANNED
    deletes: dict[str, Any] = Field(default_factory=dict)
    retains: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None
    blocked_by: list[str] = Field(default_factory=list)
    retry_command: str | None = None
    drain: ClusterDrain | None = None  # a cluster phase: its drain (or, planned, its eviction preview)
    retry: Any = Field(default=None, exclude=True, repr=False)  # the engine's `Retry`, never in JSON/receipts

    @property
    def name(self) -> str:
        return f"{self.phase}:{self.stack}"

    def to_json(self) -> dict[str, Any]:
        document = {"name": self.name, **self.model_dump(mode="json")}
        if document.get("drain") is None:
            document.pop("drain", None)
        return document


# Phases whose failure no stack result carries (cluster and network phases are stack destroys).
_STACKLESS_PHASES = (PhaseName.BUCKET, PhaseName.STORAGE_IDENTITY, PhaseName.PROJECT)


class FleetResult(BaseModel):
    command: str
    fleet: str
    cloud: str
    backend: str
    stacks: list[StackResult] = Field(default_factory=list)
    preflight: dict[str, Any] | None = None
    error: str | None = None
    warnings: list[str] = Field(default_factory=list)
    phases: list[TeardownPhase] = Field(default_factory=list)  # destroy only
    dry_run: bool = False
    receipt: str | None = None  # destroy: the receipt file written
    shard: str | None = None  # `--shard K/N`: which share of the fleet this result covers (preview-merge)
    receipt_id: str | None = None  # destroy: its id, for `destroy --receipt ID`
    resumes: str | None = None  # destroy --receipt: the receipt this run continued
    resume_command: str | None = None  # a partial cleanup: the one command that continues it
    # The engine's `Retry` behind `resume_command`, or behind a halted rollout's `resume_command`; never in
    # the JSON document.
    resume: Any = Field(default=None, exclude=True, repr=False)
    # preview: the cost delta (plan/cost_delta.py `summarize`); status: what the deployed fleet costs
    cost: dict[str, Any] | None = None
    # Policy results about the whole fleet rather than one stack (the fleet-monthly-budget guardrail)
    policy: list[PolicyViolation] = Field(default_factory=list)
    # A staged rollout (plan/rollout.py): its waves and, for up and status, each wave's state, where it
    # halted and why, and the command that resumes it (engine/rollout.py).
    rollout: dict[str, Any] | None = None
    # status --no-live: the stacks' records only, the live cloud not read (`"live": false` in the JSON)
    live: bool = True

    @property
    def partial_cleanup(self) -> bool:
        """A destroy or cleanup that ran and left something it was asked to delete: a phase was refused,
        failed or was blocked (or a stack's destroy failed). A phase retained because it was not asked for
        is not one. Never success: exit 2, and the receipt says what is left."""
        if self.command not in ("destroy", "cleanup") or self.dry_run:
            return False
        unfinished = any(p.status in UNFINISHED_OUTCOMES for p in self.phases)
        return unfinished or any(s.failed for s in self.stacks)

    @property
    def outcome(self) -> str:
        return "partial-cleanup" if self.partial_cleanup else ("failed" if self.failed_count else "ok")

    @property
    def failed_count(self) -> int:
        """How many things failed (stacks, the run's own error, stackless phases, mandatory fleet policy);
        0 is success. The JSON keeps the name `totals.failed`."""
        stackless = sum(
            1
            for p in self.phases
            if p.status == "failed" and (p.phase in _STACKLESS_PHASES or self.command != "destroy")
        )
        mandatory = sum(1 for v in self.policy if v.level.lower() == "mandatory")
        return sum(1 for s in self.stacks if s.failed) + (1 if self.error else 0) + stackless + mandatory

    def clusters(self) -> list[StackResult]:
        return [s for s in self.stacks if s.kind == "cluster"]

    def totals(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for stack in self.stacks:
            counts[stack.status.value] = counts.get(stack.status.value, 0) + 1
        totals = {"stacks": len(self.stacks), "clusters": len(self.clusters()), "failed": self.failed_count}
        return {**totals, **counts}

    def backend_counts(self) -> dict[str, int]:
        """Cluster stacks per backend, as the original tool's summary counted them."""
        counts = {kind.value: 0 for kind in BackendKind}
        for stack in self.clusters():
            kind = stack.backend or BackendKind.MK8S
            counts[kind.value] += 1
        return counts

    def to_json(self) -> dict[str, Any]:
        clusters = [
            {
                "project_key": s.project_key,
                "project_id": s.project_id,
                "cluster_name": s.cluster_name,
                "stack": s.stack,
                "status": s.status.value,
                "cluster_id": s.cluster_id,
                "kube_context": s.kube_context,
                "kubeconfig": s.kubeconfig,
                "validation": s.validation,
                "health": s.health,
                "kuberay": s.kuberay,
                "changes": s.changes,
                "policy": [v.model_dump() for v in s.policy],
                "node_groups": s.node_groups,
                "drift": s.drift,
                "terraform": s.terraform,
                **({"disruption": s.disruption} if s.disruption is not None else {}),
                **({"pending": s.pending} if s.pending is not None else {}),
                **({"versions": s.versions} if s.versions is not None else {}),
                "error": s.error,
                "retry_command": s.retry_command,
                **({"backend": s.backend} if s.backend else {}),
                **({"slurm": s.slurm} if s.slurm is not None else {}),
            }
            for s in self.clusters()
        ]
        projects = [
            {
                "project_key": s.project_key,
                "project_id": s.project_id,
                "stack": s.stack,
                "status": s.status.value,
                "changes": s.changes,
                "policy": [v.model_dump() for v in s.policy],
                "outputs": s.outputs,
                **({"disruption": s.disruption} if s.disruption is not None else {}),
                "error": s.error,
                "retry_command": s.retry_command,
            }
            for s in self.stacks
            if s.kind == "project"
        ]
        teardown = {}
        if self.command in ("destroy", "cleanup"):
            teardown = {
                "dry_run": self.dry_run,
                "outcome": "planned" if self.dry_run else self.outcome,
                "phases": [p.to_json() for p in self.phases],
                "receipt": self.receipt,
                "receipt_id": self.receipt_id,
                "resumes": self.resumes,
                "resume_command": self.resume_command,
            }
        if self.command == "adopt":  # what was found (a dry run) or taken over, and the receipt
            teardown = {"dry_run": self.dry_run, "receipt": self.receipt}
        return {
            **teardown,
            "command": self.command,
            "fleet": self.fleet,
            "cloud": self.cloud,
            "backend": self.backend,
            "ok": self.failed_count == 0 and not self.partial_cleanup,
            "clusters": clusters,
            "projects": projects,
            "stacks": [self._stack_json(s) for s in self.stacks],
            "totals": self.totals(),
            "backend_counts": self.backend_counts(),
            "preflight": self.preflight,
            "error": self.error,
            "warnings": self.warnings,
            **({"shard": self.shard} if self.shard else {}),
            **({"cost": self.cost} if self.cost is not None else {}),
            **({"policy": [v.model_dump() for v in self.policy]} if self.policy else {}),
            **({"rollout": self.rollout} if self.rollout else {}),
            **({"live": False} if not self.live else {}),
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> FleetResult:
        """The result a `to_json()` document describes (what `preview-merge` reads back): every stack with
        its fields, project stacks with their outputs. Raises pydantic's ValidationError on a document
        of another shape."""
        outputs = {
            str(p.get("stack")): dict(p.get("outputs") or {})
            for p in document.get("projects") or []
            if isinstance(p, dict)
        }
        stacks = [
            StackResult.model_validate({**s, "outputs": outputs.get(str(s.get("stack")), {})})
            for s in document.get("stacks") or []
        ]
        fields = ("command", "fleet", "cloud", "backend", "preflight", "error", "warnings", "dry_run", "cost")
        known = {name: document[name] for name in fields if name in document}
        policy = document.get("policy") or []
        return cls.model_validate(
            {
                **known,
                "stacks": stacks,
                "shard": document.get("shard"),
                "policy": policy,
                "rollout": document.get("rollout"),
            }
        )

    @staticmethod
    def _stack_json(stack: StackResult) -> dict[str, Any]:
        return stack.model_dump(exclude={"outputs"})
