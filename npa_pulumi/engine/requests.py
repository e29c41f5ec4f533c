"""What an operation is asked: one typed request per operation, composed of small parts.

    selection = Selection(projects=("research",), shard="1/4", stage="clusters")
    request = UpRequest(selection=selection, where=Where(cloud="local"), concurrency=8)

Every fleet request (`FleetRequest`) carries the parts every operation shares — the selection, where the
fleet lives (`Where`: cloud, profile, Pulumi backend, secrets), the recipes, how many stacks run at once —
and each operation's request adds its own settings (a preview's policies, prices and rollout; an up's
fail-fast and health gate; a destroy's opt-in deletions; a verifier's timeout). The engine's operations
take these requests as they are (`engine/operations/<op>.py`: `run(context, request)`), and the SDK
re-exports them (npa_pulumi/sdk/requests.py).

A request checks itself when it is made, before any spec is read or anything runs: a bad shard, a stage
that cannot be sharded, `break_lock` with a shard, a wave that does not parse, `delete_nonempty_buckets`
without `delete_buckets`, a health threshold out of range are each a UserInputError (exit 2 in the CLI).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from npa_pulumi.engine.share import Share, Stage, parse_stage
from npa_pulumi.engine.teardown.model import TeardownOptions
from npa_pulumi.errors import UserInputError
from npa_pulumi.plan import Target
from npa_pulumi.plan.shards import Shard, parse_shard, select_shard
from npa_pulumi.spec.constants import BackendKind

DEFAULT_CONCURRENCY = 4


@dataclass(frozen=True)
class Selection:
    """Which targets an operation covers: projects (keys or display names) and clusters (empty: all), the
    project prefix over the spec's, a shard `K/N` of the clusters, a stage (only the project stacks, or
    only the cluster stacks). Checked once, here: the shard parses and the projects stage is unsharded."""

    projects: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    prefix: str | None = None
    shard: str | None = None
    stage: str | None = None  # "projects" | "clusters" (Stage); None: both, in order
    _parsed: Shard | None = field(default=None, init=False, repr=False, compare=False)
    _stage: Stage | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A bad shard fails before the stage is looked at, as before the spec is read.
        object.__setattr__(self, "_parsed", parse_shard(self.shard) if self.shard is not None else None)
        object.__setattr__(self, "_stage", parse_stage(self.stage, self.shard))

    def owned(self, targets: list[Target]) -> list[Target]:
        """The resolved targets this selection's shard owns (all of them without a shard)."""
        return select_shard(targets, self._parsed)

    @property
    def share(self) -> Share:
        """The share of the fleet graph a run of this selection covers (engine/graph.py)."""
        return Share(self._stage, self.shard)


@dataclass(frozen=True, kw_only=True)
class Where:
    """Where the fleet lives: the cloud adapter (`local` or `nebius`), the Nebius profile (None: the spec's,
    else the configured default), how Nebius is authenticated to (`auth`: "federated" exchanges a CI job's
    OIDC token, cloud/nebius/federated.py; None: $NPA_NEBIUS_AUTH, else the profile), the Pulumi backend
    (None: $NPA_BACKEND, else the local file backend), the secrets passphrase file and the secrets provider
    of new stacks."""

    cloud: str = "local"
    profile: str | None = None
    auth: str | None = None
    backend: str | None = None
    passphrase_file: str | None = None
    secrets_provider: str | None = None


@dataclass(frozen=True, kw_only=True)
class RecipeChoice:
    """One backend's recipe: a local checkout (`dir`) or a git ref (`ref`); neither: the backend's own
    default for the cloud (engine/backends/<kind>/: the pinned upstream, or a shipped local stand-in)."""

    dir: str | None = None
    ref: str | None = None


@dataclass(frozen=True)
class Recipes:
    """The recipes the cluster stacks run, one choice per backend kind (each backend reads its own)."""

    by_backend: Mapping[BackendKind, RecipeChoice] = field(default_factory=dict)

    def of(self, kind: BackendKind) -> RecipeChoice:
        return self.by_backend.get(kind, RecipeChoice())


@dataclass(frozen=True)
class Rollout:
    """A staged rollout's flags, over the spec's `rollout:` block (None: the spec's own value).
    `ignore_maintenance`: start a cluster with an active maintenance event or a NebiusGPUError node anyway
    (a rollout holds it otherwise)."""

    waves: str | None = None
    max_in_flight: int | None = None
    max_in_flight_per_reservation: int | None = None
    ignore_maintenance: bool = False

    def __post_init__(self) -> None:
        from npa_pulumi.plan.rollout import parse_waves

        if self.waves:
            parse_waves(self.waves)  # a UserInputError names the bad wave


@dataclass(frozen=True)
class Policies:
    """Policy packs beyond fleet-guardrails, and one config file for all of them (keyed by policy name)."""

    packs: tuple[str, ...] = ()
    config: str | None = None


@dataclass(frozen=True, kw_only=True)
class FleetRequest:
    """What every fleet operation is asked: the selection, where the fleet lives, the recipes and how many
    stacks run at once. `show_progress`: rich progress on stderr (the CLI's; an SDK caller's default is
    none)."""

    selection: Selection = Selection()
    where: Where = Where()
    recipes: Recipes = Recipes()
    concurrency: int = DEFAULT_CONCURRENCY
    show_progress: bool = False


@dataclass(frozen=True, kw_only=True)
class Exclusive:
    """A mutating run's lock settings: `break_lock` takes over stack locks (and run records) that another
    machine holds, never those of a live process on this machine; never with a shard (in a matrix the
    holder is most likely a sibling shard)."""

    break_lock: bool = False


def _check_break_lock(selection: Selection, break_lock: bool) -> None:
    if break_lock and selection.shard:
        raise UserInputError(
            "--break-lock cannot be combined with --shard: recover a lock in an unsharded run"
        )


@dataclass(frozen=True, kw_only=True)
class PreviewRequest(FleetRequest):
    """`preview`: policy packs beyond fleet-guardrails, Terraform's plan for every cluster (`refresh`),
    the quota preflight (read-only), the price catalog and a rollout to show."""

    preflight: bool = True
    policies: Policies = Policies()
    refresh: bool = False
    prices: str | None = None
    rollout: Rollout = Rollout()


@dataclass(frozen=True, kw_only=True)
class UpRequest(PreviewRequest, Exclusive):
    """`up`: a preview's settings, and how it deploys: `fail_fast` (stop scheduling after a failure),
    `create_projects`, the GPU health gate, `break_lock` (never with a shard)."""

    fail_fast: bool = False
    create_projects: bool = True
    health_gate: bool = True
    # Apply a disruptive change without waiting for the jobs of `maintenance.wait_for_jobs` (and without
    # draining the workload manager's workers).
    force: bool = False
    # How long a shard waits for another shard to finish a project stack they share.
    shard_wait_s: float = 1800.0

    def __post_init__(self) -> None:
        _check_break_lock(self.selection, self.break_lock)


@dataclass(frozen=True, kw_only=True)
class AdoptRequest(FleetRequest):
    """`adopt`: take over the clusters the original `npa fleet` deployed. `source`: its fleet directory
    (None: `~/.npa/fleet/<spec name>`); `dry_run`: only say what each selected cluster is (found,
    not-found, mismatched, already-adopted, refused); `health_gate`: the gate runs after the takeover, as
    after an `up`."""

    source: str | None = None
    dry_run: bool = False
    health_gate: bool = True


@dataclass(frozen=True, kw_only=True)
class StatusRequest(FleetRequest):
    """`status`: stack outputs checked against the live cloud, with what it costs (`prices`)."""

    prices: str | None = None
    live: bool = True  # False: the stacks' records only, the live cloud not read (`--no-live`)


@dataclass(frozen=True, kw_only=True)
class RefreshRequest(FleetRequest, Exclusive):
    """`refresh`: every selected stack compared with the live cloud, drift recorded."""

    def __post_init__(self) -> None:
        _check_break_lock(self.selection, self.break_lock)


def _check_teardown(teardown: TeardownOptions) -> None:
    if teardown.delete_nonempty_buckets and not teardown.delete_buckets:
        raise UserInputError("--delete-nonempty-buckets only applies together with --delete-buckets")


@dataclass(frozen=True, kw_only=True)
class CleanupRequest(FleetRequest):
    """`cleanup --spec`: the cloud sweep of what no stack references; the opt-in deletions of `teardown`
    (each ownership-gated); `dry_run` only plans them."""

    teardown: TeardownOptions = field(default_factory=TeardownOptions)
    dry_run: bool = False

    def __post_init__(self) -> None:
        _check_teardown(self.teardown)


@dataclass(frozen=True, kw_only=True)
class AttestRequest(FleetRequest):
    """`reconcile storage-account --attest-npa-created`: prove the exact service account of one project and
    record the operator's attestation that npa created it (`dry_run`: prove only)."""

    project_key: str
    account_id: str
    reason: str
    dry_run: bool = False


@dataclass(frozen=True)
class ClusterProof:
    """`destroy --project-id P --cluster-id C`: the exact ids of the one selected cluster, for a cluster the
    cloud has and no stack records (no recoverable state). Never a name match: both ids must agree with the
    cloud and the spec before the cluster is deleted by its id."""

    project_id: str
    cluster_id: str


@dataclass(frozen=True, kw_only=True)
class DestroyRequest(CleanupRequest, Exclusive):
    """`destroy`: cluster stacks, then project stacks once none of their clusters remain, then the opt-in,
    ownership-gated phases of `teardown`; `dry_run` only plans them; `break_lock` never with a shard;
    `cluster_proof`: the exact ids that let it delete a selected cluster without a stack."""

    cluster_proof: ClusterProof | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_break_lock(self.selection, self.break_lock)
        proof = self.cluster_proof
        if proof is not None and not (proof.project_id.strip() and proof.cluster_id.strip()):
            raise UserInputError("--project-id and --cluster-id go together, each an exact id")


@dataclass(frozen=True, kw_only=True)
class ReceiptDestroyRequest:
    """`destroy --receipt ID`: continue a recorded teardown. Identity comes from what is given here, then
    the receipt, then the spec, and any clash stops before a change: `cloud`, `backend` and `profile` are
    None unless the caller chose them. Without `spec_path` only the guarded phases (bucket, storage
    identity, project) run. `selection` may name only the receipt's own projects (no clusters, no shard).
    The receipt's deletions stay asked for; `teardown`'s add to them."""

    receipt: str
    spec_path: str | None = None
    selection: Selection = Selection()
    cloud: str | None = None
    backend: str | None = None
    profile: str | None = None
    auth: str | None = None
    passphrase_file: str | None = None
    recipes: Recipes = Recipes()
    concurrency: int = DEFAULT_CONCURRENCY
    show_progress: bool = False
    teardown: TeardownOptions = field(default_factory=TeardownOptions)
    dry_run: bool = False

    def __post_init__(self) -> None:
        _check_teardown(self.teardown)


@dataclass(frozen=True, kw_only=True)
class LocalCleanupRequest:
    """`cleanup` without a spec: the npa home only. `remove`: delete the residue of stacks that no longer
    exist; `prune_after_days`: with `remove`, also delete fully terminal receipts older than that; `full`:
    also failed scratch cleanups and caches of earlier layouts (engine/teardown/local_cleanup.py)."""

    backend: str | None = None
    remove: bool = False
    prune_after_days: float | None = None
    full: bool = False


@dataclass(frozen=True, kw_only=True)
class VerifyRequest(FleetRequest):
    """`verify-graphics`, `verify-storage`, `verify-fabric`: the verifier's timeout (None: its own, 10
    minutes; the fabric's 15) and where to keep each cluster's exact evidence (0700, outside a git work
    tree)."""

    timeout_s: float | None = None
    evidence_dir: Path | None = None
    poll_s: float = 2.0


@dataclass(frozen=True, kw_only=True)
class MigVerifyRequest(VerifyRequest):
    """`verify-mig`: also `wait` (poll until ready or the timeout) and `reconcile` (the repairs of
    npa_pulumi/kube/gpu_health/repair.py: stale OnDelete driver pods one worker at a time, the stale
    mig-not-ready taint, GFD then the device plugin; refused while GPU workloads run; it waits as `wait`
    does, and the full gate runs again after a repair)."""

    wait: bool = False
    reconcile: bool = False


@dataclass(frozen=True, kw_only=True)
class GraphicsVerifyRequest(VerifyRequest):
    """`verify-graphics`: also `reconcile` (the repairs of npa_pulumi/kube/gpu_health/repair.py before the
    gate: stale OnDelete driver pods one worker at a time, GFD then the device plugin; refused while GPU
    workloads run)."""

    reconcile: bool = False


@dataclass(frozen=True)
class HealthWatch:
    """`health --watch`: read every `interval_s` seconds, `iterations` times (None: until interrupted),
    serving Prometheus metrics on `metrics_port` (`metrics_addr`, 127.0.0.1 by default) and appending
    transitions to `events_path`."""

    interval_s: float = 60.0
    iterations: int | None = None
    metrics_port: int | None = None
    events_path: Path | None = None
    metrics_addr: str = "127.0.0.1"

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise UserInputError("--interval must be positive")
        if self.iterations is not None and self.iterations < 1:
            raise UserInputError("--iterations must be at least 1")


@dataclass(frozen=True, kw_only=True)
class HealthRequest(FleetRequest):
    """`health`: the fraction of each cluster's requested GPUs that must be usable (`min_usable`, 0..1),
    `requalify`: the gate's per-node probes on the nodes that joined after the last gate pass
    (`timeout_s` per cluster; None: 10 minutes), and `remediate`: the repair ladder's plan, acted on by the
    watch (`watch`) or only shown (without)."""

    min_usable: float = 1.0
    requalify: bool = False
    timeout_s: float | None = None
    watch: HealthWatch | None = None
    # `--remediate`: the repair ladder's decisions; with `watch` it acts on them (`--watch --remediate`),
    # without, it only shows them (`--remediate --dry-run`)
    remediate: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_usable <= 1.0:
            raise UserInputError(f"--min-usable {self.min_usable:g}: a fraction between 0 and 1")
        if self.requalify and self.watch is not None:
            raise UserInputError("--requalify runs once: it cannot be combined with --watch")
        if self.remediate and self.requalify:
            raise UserInputError("--remediate requalifies through its ladder: it cannot take --requalify")

    @property
    def requalify_timeout_s(self) -> float:
        return self.timeout_s if self.timeout_s is not None else 600.0


# ---------------------------------------------------------------------------------- what a run asks


def refreshes(request: FleetRequest) -> bool:
    """Whether the run re-reads every stack first (`--refresh`): nothing it recorded is taken as is."""
    return isinstance(request, PreviewRequest) and request.refresh


def policies(request: FleetRequest) -> Policies:
    """The policy packs and config of a run that runs the policies (preview, up); none otherwise."""
    return request.policies if isinstance(request, PreviewRequest) else Policies()


def breaks_locks(request: FleetRequest) -> bool:
    return isinstance(request, Exclusive) and request.break_lock


def fails_fast(request: FleetRequest) -> bool:
    return isinstance(request, UpRequest) and request.fail_fast


def runs_health_gate(request: FleetRequest) -> bool:
    """Whether the cluster stacks' programs run the health gate (`up --no-health-gate` is the exception)."""
    return request.health_gate if isinstance(request, UpRequest | AdoptRequest) else True


def creates_projects(request: FleetRequest) -> bool:
    """Whether a project the spec names and the tenant lacks is created (`--no-create-projects`)."""
    return request.create_projects if isinstance(request, UpRequest) else True


def prices(request: FleetRequest) -> str | None:
    return request.prices if isinstance(request, PreviewRequest | StatusRequest) else None


def rollout(request: FleetRequest) -> Rollout:
    return request.rollout if isinstance(request, PreviewRequest) else Rollout()


__all__ = [
    "DEFAULT_CONCURRENCY",
    "AdoptRequest",
    "AttestRequest",
    "CleanupRequest",
    "ClusterProof",
    "DestroyRequest",
    "Exclusive",
    "FleetRequest",
    "GraphicsVerifyRequest",
    "HealthRequest",
    "HealthWatch",
    "LocalCleanupRequest",
    "MigVerifyRequest",
    "Policies",
    "PreviewRequest",
    "ReceiptDestroyRequest",
    "RecipeChoice",
    "Recipes",
    "RefreshRequest",
    "Rollout",
    "Selection",
    "Stage",
    "StatusRequest",
    "TeardownOptions",
    "UpRequest",
    "VerifyRequest",
    "Where",
]
