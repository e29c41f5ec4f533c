"""What a fleet operation reports: one entry per stack, totals, and the JSON/text forms of both."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

StackKind = Literal["project", "cluster"]

# Per-stack outcomes. `status` vocabulary by command:
#   up:      deployed | unchanged | failed | skipped | not-deployable (a backend this version cannot deploy:
#            a failure, exit 1; preview, status and destroy list such a target as not-supported)
#   preview: changes | no-changes | failed | not-supported
#   destroy: destroyed | absent | destroy-incomplete | retained | skipped (and per phase: PhaseOutcome)
#   status:  deployed | provisioning | failed | destroyed | drifted | absent | unknown, and while an
#            `up` runs elsewhere provisioning | validating-gpu-health | validating-mig |
#            validating-cluster-basics | validating-fabric | validating-kuberay; destroy-incomplete after a
#            failed destroy
#            (engine/lifecycle.py)
#   refresh: in-sync | drifted | absent | failed
#   up also: deployed-validation-failed (the GPU health gate did not pass; everything is kept for a retry)
#            deployed-credentials-failed (the stack is deployed, but no kubeconfig could be had)
#            deployed-mig-not-ready (a MIG cluster's layout did not converge; kept likewise)
FAILED_LIFECYCLES = ("deployed-validation-failed", "deployed-mig-not-ready", "deployed-credentials-failed")
#   verify-mig / verify-graphics / verify-storage: ready | not-ready | failed (| skipped: storage
#            disabled in the spec)
FAILED_STATUSES = {
    "failed",
    "destroy-incomplete",
    "status-error",
    "not-ready",
    "not-deployable",
    # adopt: a selected cluster that cannot be taken over as the spec stands (nothing is adopted)
    "not-found",
    "mismatched",
    "refused",
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
    status: str
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
    backend: str | None = None
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
    retry: Any = Field(default=None, exclude=True, repr=False)  # the engine's `Retry`, never in JSON/receipts

    @property
    def name(self) -> str:
        return f"{self.phase}:{self.stack}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, **self.model_dump()}


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
            counts[stack.status] = counts.get(stack.status, 0) + 1
        totals = {"stacks": len(self.stacks), "clusters": len(self.clusters()), "failed": self.failed_count}
        return {**totals, **counts}

    def backend_counts(self) -> dict[str, int]:
        """Cluster stacks per backend, as the original tool's summary counted them."""
        counts = {"mk8s": 0, "soperator": 0}
        for stack in self.clusters():
            kind = stack.backend or "mk8s"
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def to_json(self) -> dict[str, Any]:
        clusters = [
            {
                "project_key": s.project_key,
                "project_id": s.project_id,
                "cluster_name": s.cluster_name,
                "stack": s.stack,
                "status": s.status,
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
                "status": s.status,
                "changes": s.changes,
                "policy": [v.model_dump() for v in s.policy],
                "outputs": s.outputs,
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
