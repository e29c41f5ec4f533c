"""The npa.fleet/v0.0.1 fleet spec: model, YAML loading with positions, and located validation errors.

spec = load_spec("fleet.yaml")      # raises SpecError (only), listing every problem with file:line:col
"""

from npa_pulumi.spec.constants import API_VERSION
from npa_pulumi.spec.errors import SpecError, SpecProblem
from npa_pulumi.spec.models import (
    ClusterSpec,
    FleetSpec,
    GpuFabricCheckSpec,
    KubeRaySpec,
    MigSpec,
    NodePoolSpec,
    ObjectStorageSpec,
    ProjectSpec,
    SoperatorControlPlaneSpec,
    SoperatorRoleSpec,
    SoperatorSpec,
    SoperatorSystemRoleSpec,
    SoperatorWorkerSpec,
)
from npa_pulumi.spec.names import cluster_stack_name, project_stack_name, slug
from npa_pulumi.spec.parse import ensure_valid, load_spec, parse_spec, spec_from_data
from npa_pulumi.spec.schema import fleet_json_schema

__all__ = [
    "API_VERSION",
    "ClusterSpec",
    "FleetSpec",
    "GpuFabricCheckSpec",
    "KubeRaySpec",
    "MigSpec",
    "NodePoolSpec",
    "ObjectStorageSpec",
    "ProjectSpec",
    "SoperatorControlPlaneSpec",
    "SoperatorRoleSpec",
    "SoperatorSpec",
    "SoperatorSystemRoleSpec",
    "SoperatorWorkerSpec",
    "SpecError",
    "SpecProblem",
    "cluster_stack_name",
    "ensure_valid",
    "fleet_json_schema",
    "load_spec",
    "parse_spec",
    "project_stack_name",
    "slug",
    "spec_from_data",
]
