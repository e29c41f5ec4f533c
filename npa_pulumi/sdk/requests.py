"""What an SDK caller (and the CLI, which is one) asks an operation: one typed request per operation.

    selection = Selection(projects=("research",), shard="1/4", stage="clusters")
    result = deploy("fleet.yaml", UpRequest(selection=selection, cloud="local", concurrency=8))

A request checks itself when it is made, before any spec is read or anything runs: a bad shard, a stage
that cannot be sharded, `break_lock` with a shard, a wave that does not parse, `delete_nonempty_buckets`
without `delete_buckets` are each a UserInputError (exit 2 in the CLI). `FleetRequest.fleet_options` turns
a request into the engine's `FleetOptions` (engine/options.py), the one place the two meet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from npa_pulumi.engine.options import DEFAULT_CONCURRENCY, FleetOptions, check_stage
from npa_pulumi.engine.teardown.model import TeardownOptions
from npa_pulumi.errors import UserInputError
from npa_pulumi.plan import Target
from npa_pulumi.plan.shards import Shard, parse_shard, select_shard

Stage = Literal["projects", "clusters"]


@dataclass(frozen=True)
class Selection:
    """Which targets an operation covers: projects (keys or display names) and clusters (empty: all), the
    project prefix over the spec's, a shard `K/N` of the clusters, a stage (only the project stacks, or
    only the cluster stacks). Checked once, here: the shard parses and the projects stage is unsharded."""

    projects: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    prefix: str | None = None
    shard: str | None = None
    stage: Stage | None = None
    _parsed: Shard | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A bad shard fails before the stage is looked at, as before the spec is read.
        object.__setattr__(self, "_parsed", parse_shard(self.shard) if self.shard is not None else None)
        check_stage(self.stage, self.shard)

    def owned(self, targets: list[Target]) -> list[Target]:
        """The resolved targets this selection's shard owns (all of them without a shard)."""
        return select_shard(targets, self._parsed)


@dataclass(frozen=True)
class Rollout:
    """A staged rollout's flags, over the spec's `rollout:` block (None: the spec's own value)."""

    waves: str | None = None
    max_in_flight: int | None = None
    max_in_flight_per_reservation: int | None = None

    def __post_init__(self) -> None:
        from npa_pulumi.plan.rollout import parse_waves

        if self.waves:
            parse_waves(self.waves)  # a UserInputError names the bad wave


@dataclass(frozen=True, kw_only=True)
class FleetRequest:
    """What every fleet operation is asked: the selection, where the fleet lives (cloud, profile, Pulumi
    backend, secrets passphrase, the secrets provider of new stacks), the recipes and how many cluster
    stacks run at once. `show_progress`: rich progress on stderr (the CLI's; an SDK caller's default is
    none)."""

    selection: Selection = Selection()
    cloud: str = "local"
    profile: str | None = None
    backend: str | None = None
    passphrase_file: str | None = None
    secrets_provider: str | None = None
    recipe_dir: str | None = None
    recipe_ref: str | None = None
    soperator_recipe_dir: str | None = None
    soperator_recipe_ref: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    show_progress: bool = False

    def fleet_options(self, spec_path: str | None) -> FleetOptions:
        """The engine's options of this request (`spec_path`: the spec file, for exact retry commands)."""
        return FleetOptions(
            cloud=self.cloud,
            profile=self.profile,
            backend=self.backend,
            passphrase_file=self.passphrase_file,
            secrets_provider=self.secrets_provider,
            recipe_dir=self.recipe_dir,
            recipe_ref=self.recipe_ref,
            soperator_recipe_dir=self.soperator_recipe_dir,
            soperator_recipe_ref=self.soperator_recipe_ref,
            concurrency=self.concurrency,
            spec_path=spec_path,
            show_progress=self.show_progress,
            shard=self.selection.shard,
            stage=self.selection.stage,
        )


def _check_break_lock(selection: Selection, break_lock: bool) -> None:
    """Breaking a lock is a person's decision about one run; in a matrix the holder is most likely a
    sibling shard."""
    if break_lock and selection.shard:
        raise UserInputError(
            "--break-lock cannot be combined with --shard: recover a lock in an unsharded run"
        )


@dataclass(frozen=True, kw_only=True)
class PreviewRequest(FleetRequest):
    """`preview`: policy packs beyond fleet-guardrails, Terraform's plan for every cluster (`refresh`),
    the quota preflight (read-only), the price catalog and a rollout to show."""

    preflight: bool = True
    policy_packs: tuple[str, ...] = ()
    policy_config: str | None = None
    refresh: bool = False
    prices: str | None = None
    rollout: Rollout = Rollout()

    def fleet_options(self, spec_path: str | None) -> FleetOptions:
        options = super().fleet_options(spec_path)
        options.policy_packs = list(self.policy_packs)
        options.policy_config = self.policy_config
        options.refresh = self.refresh
        options.prices = self.prices
        options.waves = self.rollout.waves
        options.max_in_flight = self.rollout.max_in_flight
        options.max_in_flight_per_reservation = self.rollout.max_in_flight_per_reservation
        return options


@dataclass(frozen=True, kw_only=True)
class UpRequest(PreviewRequest):
    """`up`: a preview's settings, and how it deploys: `fail_fast` (stop scheduling after a failure),
    `create_projects`, the GPU health gate, `break_lock` (never with a shard)."""

    fail_fast: bool = False
    create_projects: bool = True
    health_gate: bool = True
    break_lock: bool = False

    def __post_init__(self) -> None:
        _check_break_lock(self.selection, self.break_lock)

    def fleet_options(self, spec_path: str | None) -> FleetOptions:
        options = super().fleet_options(spec_path)
        options.fail_fast = self.fail_fast
        options.create_projects = self.create_projects
        options.health_gate = self.health_gate
        options.break_lock = self.break_lock
        return options


@dataclass(frozen=True, kw_only=True)
class AdoptRequest(FleetRequest):
    """`adopt`: take over the clusters the original `npa fleet` deployed. `source`: its fleet directory
    (None: `~/.npa/fleet/<spec name>`); `dry_run`: only say what each selected cluster is (found,
    not-found, mismatched, already-adopted, refused); `health_gate`: the gate runs after the takeover, as
    after an `up`."""

    source: str | None = None
    dry_run: bool = False
    health_gate: bool = True

    def fleet_options(self, spec_path: str | None) -> FleetOptions:
        options = super().fleet_options(spec_path)
        options.health_gate = self.health_gate
        return options


@dataclass(frozen=True, kw_only=True)
class StatusRequest(FleetRequest):
    """`status`: stack outputs checked against the live cloud, with what it costs (`prices`)."""

    prices: str | None = None
    live: bool = True  # False: the stacks' records only, the live cloud not read (`--no-live`)

    def fleet_options(self, spec_path: str | None) -> FleetOptions:
        options = super().fleet_options(spec_path)
        options.prices = self.prices
        options.live = self.live
        return options


@dataclass(frozen=True, kw_only=True)
class RefreshRequest(FleetRequest):
    """`refresh`: every selected stack compared with the live cloud, drift recorded."""

    break_lock: bool = False

    def __post_init__(self) -> None:
        _check_break_lock(self.selection, self.break_lock)

    def fleet_options(self, spec_path: str | None) -> FleetOptions:
        options = super().fleet_options(spec_path)
        options.break_lock = self.break_lock
        return options


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
class DestroyRequest(CleanupRequest):
    """`destroy`: cluster stacks, then project stacks once none of their clusters remain, then the opt-in,
    ownership-gated phases of `teardown`; `dry_run` only plans them; `break_lock` never with a shard."""

    break_lock: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_break_lock(self.selection, self.break_lock)

    def fleet_options(self, spec_path: str | None) -> FleetOptions:
        options = super().fleet_options(spec_path)
        options.break_lock = self.break_lock
        return options


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
    passphrase_file: str | None = None
    recipe_dir: str | None = None
    recipe_ref: str | None = None
    soperator_recipe_dir: str | None = None
    soperator_recipe_ref: str | None = None
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


@dataclass(frozen=True, kw_only=True)
class MigVerifyRequest(VerifyRequest):
    """`verify-mig`: also `wait` (poll until ready or the timeout) and `reconcile` (remove only the stale
    mig-not-ready taint from otherwise good nodes)."""

    wait: bool = False
    reconcile: bool = False


@dataclass(frozen=True)
class HealthWatch:
    """`health --watch`: read every `interval_s` seconds, `iterations` times (None: until interrupted),
    serving Prometheus metrics on `metrics_port` (127.0.0.1) and appending transitions to `events_path`."""

    interval_s: float = 60.0
    iterations: int | None = None
    metrics_port: int | None = None
    events_path: Path | None = None

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise UserInputError("--interval must be positive")
        if self.iterations is not None and self.iterations < 1:
            raise UserInputError("--iterations must be at least 1")


@dataclass(frozen=True, kw_only=True)
class HealthRequest(FleetRequest):
    """`health`: the fraction of each cluster's requested GPUs that must be usable (`min_usable`, 0..1),
    and `requalify`: the gate's per-node probes on the nodes that joined after the last gate pass
    (`timeout_s` per cluster; None: 10 minutes)."""

    min_usable: float = 1.0
    requalify: bool = False
    timeout_s: float | None = None
    watch: HealthWatch | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_usable <= 1.0:
            raise UserInputError(f"--min-usable {self.min_usable:g}: a fraction between 0 and 1")
        if self.requalify and self.watch is not None:
            raise UserInputError("--requalify runs once: it cannot be combined with --watch")


__all__ = [
    "CleanupRequest",
    "DestroyRequest",
    "FleetRequest",
    "HealthRequest",
    "HealthWatch",
    "LocalCleanupRequest",
    "MigVerifyRequest",
    "PreviewRequest",
    "ReceiptDestroyRequest",
    "RefreshRequest",
    "Rollout",
    "Selection",
    "Stage",
    "StatusRequest",
    "TeardownOptions",
    "UpRequest",
    "VerifyRequest",
]
