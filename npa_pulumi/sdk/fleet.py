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
error is the same SpecError, without line numbers. Deploy, preview, destroy and status arrive with the
fleet engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def plan(
    spec: FleetSpec | str | Path,
    *,
    only_projects: Sequence[str] = (),
    only_clusters: Sequence[str] = (),
    project_prefix: str | None = None,
) -> dict[str, Any]:
    """The offline plan of a fleet (a FleetSpec, or the path of a spec file); no cloud calls."""
    fleet = spec if isinstance(spec, FleetSpec) else load_spec(spec)
    targets = resolve_targets(fleet, only_projects, only_clusters, project_prefix)
    return plan_document(fleet, targets, project_prefix)


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
    "ensure_valid",
    "load_spec",
    "parse_spec",
    "plan",
    "read_recipe_variables",
    "render_tfvars",
    "resolve_targets",
]
