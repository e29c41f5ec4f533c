"""The fleet SDK: build or load an npa.fleet/v0.0.1 spec in Python and plan it.

    from npa_pulumi.sdk.fleet import FleetSpec, ProjectSpec, ClusterSpec, NodePoolSpec, plan

    spec = FleetSpec(
        name="demo",
        region="eu-north1",
        projects=[
            ProjectSpec(
                name="a",
                clusters=[ClusterSpec(cpu_nodes=NodePoolSpec(count=2, preset="16vcpu-64gb"))],
            ),
        ],
    )
    document = plan(spec)          # the JSON document of `npa-pulumi plan --output json`

A spec built in Python is validated by `plan`/`resolve_targets` with the same rules as a YAML file; the
error is the same SpecError, without line numbers.

Operating a fleet (these drive the real Pulumi engine; `cloud="local"` is the embedded simulator):

    result = deploy(spec, cloud="local", concurrency=4)   # a FleetResult; result.to_json() is the CLI JSON
    preview(spec); status(spec); refresh(spec); destroy(spec, only_clusters=["infer"])

They never prompt: calling them is the confirmation. `deploy` runs the quota preflight first (set
`preflight=False` to skip) and returns the failed report in `result.preflight` instead of deploying.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.plan import (
    RenderedTfvars,
    SelectorError,
    Target,
    plan_document,
    read_recipe_variables,
    render_tfvars,
    resolve_targets,
)
from npa_pulumi.spec import (
    ClusterSpec,
    FleetSpec,
    KubeRaySpec,
    MigSpec,
    NodePoolSpec,
    ObjectStorageSpec,
    ProjectSpec,
    SoperatorSpec,
    SoperatorWorkerSpec,
    SpecError,
    SpecProblem,
    ensure_valid,
    load_spec,
    parse_spec,
)

if TYPE_CHECKING:
    from npa_pulumi.engine.orchestrator import Fleet
    from npa_pulumi.engine.verify import VerifyOptions
    from npa_pulumi.output.results import FleetResult


def plan(
    spec: FleetSpec | str | Path,
    *,
    only_projects: Sequence[str] = (),
    only_clusters: Sequence[str] = (),
    project_prefix: str | None = None,
    prices: str | Path | None = None,
) -> dict[str, Any]:
    """The offline plan of a fleet (a FleetSpec, or the path of a spec file), with its cost (`prices`: a
    --prices file over the shipped catalog; default $NPA_PRICES, else the shipped one); no cloud calls."""
    from npa_pulumi.plan.prices import load_catalog

    fleet = spec if isinstance(spec, FleetSpec) else load_spec(spec)
    targets = resolve_targets(fleet, only_projects, only_clusters, project_prefix)
    return plan_document(fleet, targets, project_prefix, load_catalog(prices))


def _fleet(
    spec: FleetSpec | str | Path,
    only_projects: Sequence[str],
    only_clusters: Sequence[str],
    project_prefix: str | None,
    options: dict[str, Any],
) -> Fleet:
    from npa_pulumi.engine.orchestrator import Fleet, FleetOptions

    fleet_spec = spec if isinstance(spec, FleetSpec) else load_spec(spec)
    targets = resolve_targets(fleet_spec, only_projects, only_clusters, project_prefix)
    if not isinstance(spec, FleetSpec):
        options.setdefault("spec_path", str(spec))
    options.setdefault("show_progress", False)
    return Fleet(fleet_spec, targets, FleetOptions(**options))


def deploy(
    spec: FleetSpec | str | Path,
    *,
    only_projects: Sequence[str] = (),
    only_clusters: Sequence[str] = (),
    project_prefix: str | None = None,
    preflight: bool = True,
    **options: Any,
) -> FleetResult:
    """`npa-pulumi up`: returns a FleetResult (see npa_pulumi.output.results). Options are FleetOptions
    fields: cloud, profile, backend, passphrase_file, recipe_dir, recipe_ref, soperator_recipe_dir,
    soperator_recipe_ref, concurrency, fail_fast, policy_packs, policy_config, create_projects, refresh,
    show_progress, prices (a --prices file: preview's and status's cost), shard ("K/N": only the clusters
    shard K of N owns; also for preview, destroy, status and refresh), stage ("projects" | "clusters": only
    that half of the fleet; also for preview, destroy and refresh), break_lock."""
    from npa_pulumi.engine.preflight_gate import preflight_gate

    fleet = _fleet(spec, only_projects, only_clusters, project_prefix, dict(options))
    with fleet.progress:
        return fleet.up(preflight=preflight_gate(fleet) if preflight else None)


def _operate(
    method: str,
    spec: FleetSpec | str | Path,
    only_projects: Sequence[str],
    only_clusters: Sequence[str],
    project_prefix: str | None,
    options: dict[str, Any],
) -> FleetResult:
    fleet = _fleet(spec, only_projects, only_clusters, project_prefix, dict(options))
    with fleet.progress:
        operation: Callable[[], FleetResult] = getattr(fleet, method)
        return operation()


def preview(
    spec: FleetSpec | str | Path,
    *,
    only_projects: Sequence[str] = (),
    only_clusters: Sequence[str] = (),
    project_prefix: str | None = None,
    **options: Any,
) -> FleetResult:
    """`npa-pulumi preview`: per-stack changes and policy results, changing nothing; each cluster whose
    Terraform inputs changed (every cluster with `refresh=True`) also carries Terraform's own plan
    (`StackResult.terraform`)."""
    return _operate("preview", spec, only_projects, only_clusters, project_prefix, options)


def destroy(
    spec: FleetSpec | str | Path,
    *,
    only_projects: Sequence[str] = (),
    only_clusters: Sequence[str] = (),
    project_prefix: str | None = None,
    dry_run: bool = False,
    delete_buckets: bool = False,
    delete_nonempty_buckets: bool = False,
    delete_storage_identity: bool = False,
    delete_projects: bool = False,
    **options: Any,
) -> FleetResult:
    """`npa-pulumi destroy`: cluster stacks, then project stacks once none of their clusters remain, then
    the opt-in, ownership-gated bucket, storage identity and project phases; `dry_run` only plans them.
    The result's `phases` say what each phase did (or would do) and why; `receipt` and `receipt_id` name the
    receipt. `partial_cleanup` (`outcome == "partial-cleanup"`) means something asked for is left; its
    `resume_command` (`npa-pulumi destroy --receipt ID --yes`) continues it."""
    from npa_pulumi.engine.teardown.model import TeardownOptions

    teardown = TeardownOptions(
        delete_buckets=delete_buckets,
        delete_nonempty_buckets=delete_nonempty_buckets,
        delete_storage_identity=delete_storage_identity,
        delete_projects=delete_projects,
    )
    fleet = _fleet(spec, only_projects, only_clusters, project_prefix, dict(options))
    with fleet.progress:
        return fleet.teardown_plan(teardown) if dry_run else fleet.destroy(teardown)


def status(
    spec: FleetSpec | str | Path,
    *,
    only_projects: Sequence[str] = (),
    only_clusters: Sequence[str] = (),
    project_prefix: str | None = None,
    **options: Any,
) -> FleetResult:
    """`npa-pulumi status`: stack outputs checked against the live cloud."""
    return _operate("status", spec, only_projects, only_clusters, project_prefix, options)


def refresh(
    spec: FleetSpec | str | Path,
    *,
    only_projects: Sequence[str] = (),
    only_clusters: Sequence[str] = (),
    project_prefix: str | None = None,
    **options: Any,
) -> FleetResult:
    """`npa-pulumi refresh`: drift per stack."""
    return _operate("refresh", spec, only_projects, only_clusters, project_prefix, options)


def verify_mig(
    spec: FleetSpec | str | Path,
    *,
    only_projects: Sequence[str] = (),
    only_clusters: Sequence[str] = (),
    project_prefix: str | None = None,
    wait: bool = False,
    reconcile: bool = False,
    timeout_s: float = 600.0,
    evidence_dir: str | Path | None = None,
    concurrency: int = 4,
    **options: Any,
) -> FleetResult:
    """`npa-pulumi verify-mig`: MIG readiness of the selected MIG clusters through their registered
    kubeconfigs; `reconcile` removes only the stale mig-not-ready taint (see npa_pulumi.engine.verify)."""
    from npa_pulumi.engine.verify import VerifyOptions
    from npa_pulumi.engine.verify import verify_mig as run

    fleet = _fleet(spec, only_projects, only_clusters, project_prefix, dict(options))
    directory = Path(evidence_dir) if evidence_dir is not None else None
    return run(
        fleet, VerifyOptions(wait, reconcile, timeout_s, evidence_dir=directory, concurrency=concurrency)
    )


def verify_graphics(
    spec: FleetSpec | str | Path,
    *,
    only_projects: Sequence[str] = (),
    only_clusters: Sequence[str] = (),
    project_prefix: str | None = None,
    timeout_s: float = 600.0,
    evidence_dir: str | Path | None = None,
    concurrency: int = 4,
    **options: Any,
) -> FleetResult:
    """`npa-pulumi verify-graphics`: CUDA and GLX/EGL/Vulkan on every GPU worker of the selected RTX
    rendering clusters, through their registered kubeconfigs."""
    from npa_pulumi.engine.verify import verify_graphics as run

    return _verify(
        run, spec, only_projects, only_clusters, project_prefix, timeout_s, evidence_dir, concurrency, options
    )


def verify_storage(
    spec: FleetSpec | str | Path,
    *,
    only_projects: Sequence[str] = (),
    only_clusters: Sequence[str] = (),
    project_prefix: str | None = None,
    timeout_s: float = 600.0,
    evidence_dir: str | Path | None = None,
    concurrency: int = 4,
    **options: Any,
) -> FleetResult:
    """`npa-pulumi verify-storage`: the shared filesystem's mount on every worker and one RWX claim shared
    by all of them, through the registered kubeconfigs (see npa_pulumi.engine.verify)."""
    from npa_pulumi.engine.verify import verify_storage as run

    return _verify(
        run, spec, only_projects, only_clusters, project_prefix, timeout_s, evidence_dir, concurrency, options
    )


def verify_fabric(
    spec: FleetSpec | str | Path,
    *,
    only_projects: Sequence[str] = (),
    only_clusters: Sequence[str] = (),
    project_prefix: str | None = None,
    timeout_s: float = 900.0,
    evidence_dir: str | Path | None = None,
    concurrency: int = 4,
    **options: Any,
) -> Any:
    """`npa-pulumi verify-fabric`: NCCL all-reduce bus bandwidth on every GPU node and across the
    InfiniBand fabric of the selected clusters (see npa_pulumi.engine.verify_fabric)."""
    from npa_pulumi.engine.verify_fabric import verify_fabric as run

    return _verify(
        run, spec, only_projects, only_clusters, project_prefix, timeout_s, evidence_dir, concurrency, options
    )


def _verify(
    run: Callable[[Fleet, VerifyOptions], FleetResult],
    spec: FleetSpec | str | Path,
    only_projects: Sequence[str],
    only_clusters: Sequence[str],
    project_prefix: str | None,
    timeout_s: float,
    evidence_dir: str | Path | None,
    concurrency: int,
    options: dict[str, Any],
) -> FleetResult:
    from npa_pulumi.engine.verify import VerifyOptions

    fleet = _fleet(spec, only_projects, only_clusters, project_prefix, dict(options))
    directory = Path(evidence_dir) if evidence_dir is not None else None
    return run(fleet, VerifyOptions(timeout_s=timeout_s, evidence_dir=directory, concurrency=concurrency))


__all__ = [
    "ClusterSpec",
    "FleetSpec",
    "KubeRaySpec",
    "MigSpec",
    "NodePoolSpec",
    "ObjectStorageSpec",
    "ProjectSpec",
    "RenderedTfvars",
    "SelectorError",
    "SoperatorSpec",
    "SoperatorWorkerSpec",
    "SpecError",
    "SpecProblem",
    "Target",
    "deploy",
    "destroy",
    "ensure_valid",
    "load_spec",
    "parse_spec",
    "plan",
    "preview",
    "read_recipe_variables",
    "refresh",
    "render_tfvars",
    "resolve_targets",
    "status",
    "verify_fabric",
    "verify_graphics",
    "verify_mig",
    "verify_storage",
]
