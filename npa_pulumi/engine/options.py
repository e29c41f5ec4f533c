"""What a fleet operation is asked to do: the options every operation shares and the stage vocabulary.

Its own module, below everything that reads it (planning, the operations, teardown), so none of them imports
the orchestrator for a type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from npa_pulumi.errors import UserInputError

DEFAULT_CONCURRENCY = 4


@dataclass
class FleetOptions:
    cloud: str = "local"
    profile: str | None = None
    # `--auth federated` (Nebius): a CI job's OIDC token exchanged for a service account's IAM token
    # (cloud/nebius/federated.py). None: $NPA_NEBIUS_AUTH, else the profile or credentials file.
    auth: str | None = None
    backend: str | None = None
    passphrase_file: str | None = None
    # New stacks' secrets provider (`--secrets-provider`; None: $NPA_SECRETS_PROVIDER, else the passphrase).
    secrets_provider: str | None = None
    recipe_dir: str | None = None
    recipe_ref: str | None = None
    # The soperator recipe (nebius-solutions-library soperator/installations/example), for soperator targets.
    soperator_recipe_dir: str | None = None
    soperator_recipe_ref: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    fail_fast: bool = False
    policy_packs: list[str] = field(default_factory=list)
    policy_config: str | None = None
    create_projects: bool = True
    refresh: bool = False
    live: bool = True  # False: `status --no-live`, the stacks' records only (no call to the cloud)
    health_gate: bool = True  # False: `up --no-health-gate`, clusters deployed with validation "skipped"
    spec_path: str | None = None  # for exact retry commands
    show_progress: bool = True
    # `--break-lock`: take over stack locks (and run records) that another machine holds; never those of a
    # live process on this machine. Without it only a lock whose owner is provably gone is recovered.
    break_lock: bool = False
    # `--shard K/N`: only the clusters this shard owns (plan/shards.py); project stacks are shared.
    shard: str | None = None
    shard_wait_s: float = 1800.0  # how long a shard waits for another to finish a shared project stack
    # `--stage projects|clusters`: only the project stacks, or only the cluster stacks, of the selection, so
    # CI runs the project phase once and the cluster phase across a matrix (None: both, in order).
    stage: str | None = None
    prices: str | None = None  # `--prices FILE` (plan/prices.py); None: $NPA_PRICES, else the shipped catalog
    # `up --waves ... --max-in-flight N --max-in-flight-per-reservation N`: a staged rollout (plan/rollout.py)
    # over the spec's `rollout:` block, or in place of it (None: the spec's).
    waves: str | None = None
    max_in_flight: int | None = None
    max_in_flight_per_reservation: int | None = None


STAGES = ("projects", "clusters")


def check_stage(stage: str | None, shard: str | None) -> None:
    """A stage is one of STAGES; the projects stage runs once, so it is never sharded (a shard owns
    clusters; every shard would run the same project stacks)."""
    if stage is not None and stage not in STAGES:
        raise UserInputError(f"--stage {stage!r}: expected one of {', '.join(STAGES)}")
    if stage == "projects" and shard:
        raise UserInputError(
            "--stage projects cannot be combined with --shard: the project stacks run once, unsharded; "
            "shard the clusters stage (--stage clusters --shard K/N)"
        )
