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

Operating a fleet (these drive the real Pulumi engine; `cloud="local"` is the embedded simulator): one
typed request per operation (npa_pulumi/sdk/requests.py), a FleetResult back (`result.to_json()` is the
CLI's JSON). The CLI's fleet commands are these calls.

    result = deploy(spec, UpRequest(where=Where(cloud="local"), concurrency=4))
    preview(spec, PreviewRequest()); status(spec, StatusRequest()); refresh(spec, RefreshRequest())
    destroy(spec, DestroyRequest(selection=Selection(clusters=("infer",))))

They never prompt: calling them is the confirmation (or pass `approve`, called with what is about to
change). `deploy` runs the quota preflight first (`UpRequest(preflight=False)` skips it) and returns the
failed report in `result.preflight` instead of deploying.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from npa_pulumi.output.results import FleetResult, StackResult, TeardownPhase
from npa_pulumi.plan import (
    RenderedTfvars,
    SelectorError,
    Target,
    plan_document,
    read_recipe_variables,
    render_tfvars,
    resolve_targets,
)
from npa_pulumi.sdk.operations import (
    Approval,
    Approve,
    Selected,
    cleanup,
    deploy,
    destroy,
    health,
    kubeconfigs,
    list_stacks,
    preflight,
    preview,
    refresh,
    select,
    status,
    verify_fabric,
    verify_graphics,
    verify_mig,
    verify_storage,
)
from npa_pulumi.sdk.receipts import destroy_from_receipt, local_cleanup
from npa_pulumi.sdk.requests import (
    CleanupRequest,
    DestroyRequest,
    FleetRequest,
    GraphicsVerifyRequest,
    HealthRequest,
    LocalCleanupRequest,
    MigVerifyRequest,
    Operation,
    Policies,
    PreviewRequest,
    ReceiptDestroyRequest,
    Recipes,
    RefreshRequest,
    RenderRetry,
    Retry,
    Rollout,
    Selection,
    StatusRequest,
    TeardownOptions,
    UpRequest,
    VerifyRequest,
    Where,
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
    targets = resolve_targets(fleet, only_projects, only_clusters, project_prefix, checked=fleet is not spec)
    return plan_document(fleet, targets, project_prefix, load_catalog(prices))


__all__ = [
    "Approval",
    "Approve",
    "CleanupRequest",
    "ClusterSpec",
    "DestroyRequest",
    "FleetRequest",
    "FleetResult",
    "FleetSpec",
    "GraphicsVerifyRequest",
    "HealthRequest",
    "KubeRaySpec",
    "LocalCleanupRequest",
    "MigSpec",
    "MigVerifyRequest",
    "NodePoolSpec",
    "ObjectStorageSpec",
    "Operation",
    "Policies",
    "PreviewRequest",
    "ProjectSpec",
    "ReceiptDestroyRequest",
    "Recipes",
    "RefreshRequest",
    "RenderRetry",
    "RenderedTfvars",
    "Retry",
    "Rollout",
    "Selected",
    "Selection",
    "SelectorError",
    "SoperatorSpec",
    "SoperatorWorkerSpec",
    "SpecError",
    "SpecProblem",
    "StackResult",
    "StatusRequest",
    "Target",
    "TeardownOptions",
    "TeardownPhase",
    "UpRequest",
    "VerifyRequest",
    "Where",
    "cleanup",
    "deploy",
    "destroy",
    "destroy_from_receipt",
    "ensure_valid",
    "health",
    "kubeconfigs",
    "list_stacks",
    "load_spec",
    "local_cleanup",
    "parse_spec",
    "plan",
    "preflight",
    "preview",
    "read_recipe_variables",
    "refresh",
    "render_tfvars",
    "resolve_targets",
    "select",
    "status",
    "verify_fabric",
    "verify_graphics",
    "verify_mig",
    "verify_storage",
]
