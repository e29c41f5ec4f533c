"""The spec as written: the YAML document's shape, used to type-check it and to publish its JSON Schema.

Every field here is optional, because a value may come from `defaults`; what a cluster finally gets is
decided by merging (see `parse`). The cluster fields are derived from `ClusterSpec` so the written form
and the resolved model cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from npa_pulumi.spec.models import (
    MK8S_FIELDS,
    ClusterSpec,
    MaintenanceSpec,
    ObjectStorageSpec,
    RemediationSpec,
    RolloutSpec,
    SoperatorSpec,
)
from npa_pulumi.spec.types import StrictText, Text


class SurfaceModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _optional_mk8s_fields() -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name in MK8S_FIELDS:
        info = ClusterSpec.model_fields[name]
        fields[name] = (info.rebuild_annotation() | None, Field(None, description=info.description))
    return fields


def _optional(annotation: Any, **field: Any) -> tuple[Any, Any]:
    return (annotation | None, Field(None, **field))


_NAME = _optional(Text, description="Cluster name (a DNS label after slugging).")

Mk8sEnvelope: type[BaseModel] = create_model(
    "Mk8sEnvelope",
    __base__=SurfaceModel,
    __doc__="`mk8s:` envelope of an explicit mk8s cluster: the flat cluster fields, nested.",
    name=_NAME,
    **_optional_mk8s_fields(),
)

ClusterEntry: type[BaseModel] = create_model(
    "ClusterEntry",
    __base__=SurfaceModel,
    __doc__=(
        "A cluster: flat (legacy) mk8s fields, or `backend: mk8s` with an `mk8s:` envelope, or "
        "`backend: soperator` with a `soperator:` payload. Also the shape of `defaults`."
    ),
    name=_NAME,
    backend=_optional(
        Text,
        description="mk8s (default) or soperator.",
        json_schema_extra={"examples": ["mk8s", "soperator"]},
    ),
    mk8s=_optional(Mk8sEnvelope, description="Explicit mk8s envelope (only name and backend beside it)."),
    soperator=(
        SoperatorSpec | None,
        Field(None, description="Soperator payload (only name and backend beside it)."),
    ),
    **_optional_mk8s_fields(),
)


class ProjectEntry(SurfaceModel):
    """A project entry of `projects`."""

    name: Text | None = Field(None, description="Logical name; display name is project_prefix + name.")
    project_id: Text | None = Field(None, description="An existing project id (never created).")
    region: Text | None = Field(None, description="Per-project region override.")
    clusters: list[ClusterEntry | None] | None = Field(
        None, description="Clusters of this project; absent means one cluster built purely from defaults."
    )
    object_storage: ObjectStorageSpec | None = None
    maintenance: MaintenanceSpec | None = Field(
        None, description="Windows and exclusions of this project's clusters (a cluster's own block wins)."
    )


class FleetDocument(SurfaceModel):
    """An npa.fleet/v0.0.1 fleet spec."""

    api_version: Text | None = Field(None, alias="apiVersion", description="npa.fleet/v0.0.1")
    name: Text | None = Field(None, description="Fleet name, a DNS label.")
    tenant_id: Text | None = Field(
        None, description="Empty means resolved from the Nebius profile at deploy."
    )
    region: Text | None = Field(None, description="Default region; projects may override it.")
    project_prefix: Text | None = Field(None, description="Prefix of created project display names.")
    ssh_public_key: Text | None = Field(None, description="SSH public key for nodes.")
    profile: Text | None = Field(None, description="~/.nebius profile to authenticate as.")
    defaults: ClusterEntry | None = Field(
        None, description="Cluster profile deep-merged under every cluster (mig and kuberay replace whole)."
    )
    projects: list[ProjectEntry] | None = Field(None, description="Non-empty list of projects.")
    rollout: RolloutSpec | None = Field(None, description="Staged rollout of `up`: canary and waves.")
    remediation: RemediationSpec | None = Field(
        None, description="Repair ladders, circuit breakers and repeat offenders of `health --remediate`."
    )
    notify: list[StrictText] | None = Field(
        None,
        description="Webhook URLs (or ${ENV_VAR}) a run posts one JSON event to when it needs a person.",
    )


def check_surface(data: Any) -> None:
    """Type-check a parsed document; raises pydantic.ValidationError listing every mismatch."""
    FleetDocument.model_validate(data)
