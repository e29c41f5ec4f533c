"""The stack outputs of a fleet, typed: what a project stack's and a cluster stack's programs export and
every reader of a stack's outputs reads (the engine, and the results' renderers here), through these models
only.

The export keys are the models' field names (the programs export through engine/programs.py `export`,
which refuses a name that is no field), so a stack deployed by an earlier version reads the same: the keys
are the ones it recorded. Reading is lenient where stored state may be older or odd: a missing output reads
as absent (None, False, []), an id that is not text as absent, a flag as set only when it was recorded as
exactly `true`, evidence that is no mapping as absent. Outputs that only one backend records live in that
backend's folder (engine/backends/<kind>/outputs.py), as models derived from `ClusterOutputs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict

from npa_pulumi.plan.cost import CostBasis
from npa_pulumi.spec.constants import BackendKind


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _flag(value: Any) -> bool:
    return value is True


def _mapping(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _texts(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


Text = Annotated[str | None, BeforeValidator(_text)]  # an id or a state; None: not recorded
Flag = Annotated[bool, BeforeValidator(_flag)]  # recorded as exactly `true`
Record = Annotated[dict[str, Any] | None, BeforeValidator(_mapping)]  # evidence, a summary, ...
Texts = Annotated[list[str], BeforeValidator(_texts)]


class StackOutputs(BaseModel):
    """What every stack records: its identity, what it was deployed from and what it costs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # The outputs that name cloud objects the stack holds (what a cloud sweep must leave alone).
    ID_FIELDS: ClassVar[tuple[str, ...]] = ("project_id", "subnet_id")

    project_id: Text = None
    subnet_id: Text = None
    # What the stack was deployed from (engine/fingerprint.py): `up` skips a stack whose plan matches it.
    npa_fingerprint: Text = None
    # What its price depends on (plan/cost.py `CostBasis`), for previews' and `status`'s costs.
    cost_basis: Any = None

    @classmethod
    def read(cls, outputs: Mapping[str, Any] | None) -> Self:
        """The stack's outputs as this model reads them (None, a stack that does not exist, reads as one
        that records nothing); outputs the model does not name are not read."""
        known = {name: value for name, value in (outputs or {}).items() if name in cls.model_fields}
        return cls.model_validate(known)

    @classmethod
    def of(cls, outputs: Mapping[str, Any] | None) -> Self | None:
        """As `read`, but None for a stack that does not exist (None)."""
        return None if outputs is None else cls.read(outputs)

    @property
    def deployed_by_fleet(self) -> bool:
        """Whether npa-pulumi deployed the stack (it carries a fingerprint)."""
        return self.npa_fingerprint is not None

    def basis(self) -> CostBasis | None:
        """The recorded cost basis; None for a stack that records none (or one this version cannot read)."""
        return CostBasis.from_output(self.cost_basis)

    def ids(self) -> set[str]:
        """Every cloud id the stack names (ID_FIELDS)."""
        found = {getattr(self, name) for name in self.ID_FIELDS}
        return {value for value in found if isinstance(value, str) and value}


class ProjectOutputs(StackOutputs):
    """A project stack's outputs (engine/programs.py `project_program`)."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = (
        "project_id",
        "network_id",
        "subnet_id",
        "bucket_id",
        "storage_service_account_id",
        "storage_key_id",
    )

    project_created: Flag = False
    tenant_id: Text = None
    region: Text = None
    network_id: Text = None
    network_owned: Flag = False
    # With object storage: the bucket, its identity (a service account and its key; the secret key reads
    # as `[secret]`) and what a teardown reads as proof of ownership.
    bucket_id: Text = None
    bucket_name: Text = None
    storage_access_key_id: Text = None
    storage_secret_access_key: Text = None
    storage_verified: Flag = False
    bucket_created: Flag = False
    storage_service_account_id: Text = None
    storage_service_account_created: Flag = False
    storage_key_id: Text = None


class ClusterOutputs(StackOutputs):
    """What every cluster stack records, whatever its backend (engine/backends/<kind>/program.py)."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("project_id", "subnet_id", "cluster_id")

    # The backend that deployed it; None for an mk8s stack (it records none: that backend came first).
    backend: Text = None
    cluster_id: Text = None
    endpoint: Text = None
    node_group_ids: Texts = []
    filesystem: Record = None  # mk8s: the shared filesystem the recipe made
    kube_context: Text = None
    # The objects the recipe declared (bridge/drift.py reads them for drift and preflight's proof).
    live_objects: Any = None
    kube_server: Text = None
    fleet_namespace: Text = None
    # The gate's verdict: `deployed`, a failed lifecycle (output/results.py FAILED_LIFECYCLES), ...
    lifecycle: Text = None
    validation: Text = None  # gpu-health | mig | cluster-basics | slurm | skipped
    health_evidence: Record = None
    kuberay_objects: Texts = []  # a KubeRay cluster's objects, which its stack's destroy deletes
    kuberay: Record = None  # the Ray gate's summary

    @property
    def kind(self) -> BackendKind | None:
        """The backend that deployed the stack; None when it names one this version does not know."""
        return BackendKind.parse(self.backend or BackendKind.MK8S.value)

    @property
    def recorded_lifecycle(self) -> str:
        """The lifecycle the stack recorded; `deployed` for one that records none (deployed before its
        gate recorded lifecycles)."""
        return self.lifecycle if self.lifecycle is not None else "deployed"

    def identity(self) -> dict[str, str | None]:
        """What a stack result says of the cluster: its project, its cluster and its kube context."""
        return {
            "project_id": self.project_id,
            "cluster_id": self.cluster_id,
            "kube_context": self.kube_context,
        }


def referenced_ids(outputs: Mapping[str, Any] | None) -> set[str]:
    """Every cloud id a stack of either kind names in its outputs."""
    return ProjectOutputs.read(outputs).ids() | ClusterOutputs.read(outputs).ids()
