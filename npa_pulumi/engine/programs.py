"""The plans the engine runs and what every stack's inline Pulumi program shares: the project stack's
program, and the pieces of every cluster stack's (its Terraform module's arguments, its project identity,
the in-cluster stage); each backend's cluster program is in its folder (engine/backends/<kind>/program.py).

Programs take engine-level plans (`ProjectPlan`, `ClusterPlan`), never spec objects, so the spec can evolve
without touching what runs inside the engine. Component classes are imported inside the programs: they
pull in the Pulumi SDK, which the rest of npa_pulumi must not need.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from npa_pulumi.bridge.recipe import PlannedRecipe
from npa_pulumi.kube.fabric_check import FabricConfig
from npa_pulumi.kube.gpu_health.config import GateConfig
from npa_pulumi.kube.kuberay import RayTemplate
from npa_pulumi.output.stack_outputs import ClusterOutputs, ProjectOutputs, StackOutputs
from npa_pulumi.spec.constants import BackendKind

PENDING = "pending-project-stack"  # identity placeholder in a preview before the project stack exists


def export(model: type[StackOutputs], **values: Any) -> None:
    """Inside a stack's program: each value as the stack output named after that field of `model` (the
    model every reader reads the stack's outputs through); a name that is no field of it raises."""
    import pulumi

    unknown = sorted(set(values) - set(model.model_fields))
    if unknown:
        raise TypeError(f"{model.__name__} has no output {', '.join(unknown)}")
    for name, value in values.items():
        pulumi.export(name, value)


def required_output(ref: Any, model: type[StackOutputs], name: str) -> Any:
    """Inside a program: output `name` (a field of `model`) of the stack `ref`, a `pulumi.StackReference`,
    names."""
    if name not in model.model_fields:
        raise TypeError(f"{model.__name__} has no output {name}")
    return ref.require_output(name)


@dataclass(frozen=True)
class StoragePlan:
    storage_class: str  # standard | enhanced_throughput | intelligent
    size_gibibytes: int
    bucket_name: str = ""


@dataclass(frozen=True)
class ProjectPlan:
    fleet: str
    project_key: str
    display_name: str
    project_id: str | None
    region: str
    tenant_id: str
    stack: str
    object_storage: StoragePlan | None = None
    create_missing: bool = True
    # What the stack's price depends on (plan/cost.py), recorded as the `cost_basis` output so a preview and
    # `status` can price the deployed fleet.
    cost_basis: dict[str, Any] = field(default_factory=dict)


class BackendGate(Protocol):
    """A backend's own gate settings: stored as its gate resource's inputs."""

    def to_inputs(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ClusterPlan:
    fleet: str
    project_key: str
    project_stack: str
    cluster_name: str
    stack: str
    region: str
    tenant_id: str
    backend: BackendKind
    subnet_id: str = ""
    tfvars: dict[str, Any] = field(default_factory=dict)
    # The capacity-block reservation and its id: secrets, never in a repr (logs, tracebacks).
    runtime_tfvars: dict[str, Any] = field(default_factory=dict, repr=False)
    recipe: PlannedRecipe | None = None  # None: a plan that names no recipe (tests)
    recipe_facts: dict[str, Any] = field(default_factory=dict)
    capacity_block_group: str = field(default="", repr=False)
    gpu_driver_mode: str = ""
    allow_unsafe_nvswitch_operator: bool = False
    nvswitch_topology: bool = False
    mig_enabled: bool = False
    has_gpus: bool = False
    # The in-cluster stage: credentials, a Kubernetes provider and the fleet's own objects. Off only for a
    # local cloud run without API servers (tests that never look inside a cluster).
    in_cluster: bool = True
    # RTX rendering clusters: the driver package repositories the fleet publishes in its ConfigMap (in the
    # GPU operator's namespace), and the revision of the operator values (plan/rtx_values.py).
    rtx_driver_repositories: dict[str, str] | None = None
    rtx_values_revision: str = ""
    # The GPU health gate's settings; None: no gate runs, the
    # cluster is deployed with validation "skipped" (`up --no-health-gate`, or MIG until MIG readiness).
    health_gate: GateConfig | None = None
    # What the stack's price depends on (plan/cost.py): pools, disks, filesystem; recorded as `cost_basis`.
    cost_basis: dict[str, Any] = field(default_factory=dict)
    # The fabric check's settings, run after the gate passed; None with the gate. `not_applicable` set:
    # recorded in the evidence, nothing runs.
    fabric_check: FabricConfig | None = None
    # `kuberay.enabled`: the fleet's KubeRay template; its gate runs after the health gate's, within the
    # same timeout.
    kuberay: RayTemplate | None = None
    # Which recipe the cluster stack runs through the Terraform bridge (its backend's: k8s-training, ...).
    module_kind: str = "k8s-training"
    # The backend's own gate settings (beside the GPU health gate's), which only its program reads: what
    # that gate waits for. Written to the fingerprint as its stored inputs (`to_inputs()`).
    backend_gate: BackendGate | None = None


@dataclass(frozen=True)
class ProjectAdoption:
    """`adopt`: what a project stack takes over from the original tool instead of choosing or creating it:
    the subnet the adopted clusters run on (owned when the original created its network) and, for a project
    with object storage, the bucket the original created for it."""

    subnet_id: str
    owned: bool
    bucket_id: str = ""
    bucket_created: bool = False


# What an adopted project stack with object storage records after its fingerprint: the storage identity
# (account, key, grant, probe) is not made by `adopt` (it would mint a key), so the next `up` must run it.
STORAGE_IDENTITY_PENDING = "+storage-identity-pending"


def project_program(
    plan: ProjectPlan,
    cloud: str,
    profile: str,
    fingerprint: str,
    adoption: ProjectAdoption | None = None,
) -> Callable[[], None]:
    def program() -> None:

        from npa_pulumi.components import (
            FleetProject,
            FleetProjectArgs,
            ObjectStorage,
            ObjectStorageArgs,
            ProjectNetwork,
            ProjectNetworkArgs,
        )

        project = FleetProject(
            plan.project_key,
            FleetProjectArgs(
                cloud=cloud,
                profile=profile,
                fleet=plan.fleet,
                project_key=plan.project_key,
                tenant_id=plan.tenant_id,
                region=plan.region,
                display_name=plan.display_name,
                project_id=plan.project_id,
                create_missing=plan.create_missing,
            ),
        )
        network = ProjectNetwork(
            f"{plan.project_key}-network",
            ProjectNetworkArgs(
                cloud=cloud,
                profile=profile,
                fleet=plan.fleet,
                project_key=plan.project_key,
                project_id=project.project_id,
                region=plan.region,
                adopt_subnet_id=adoption.subnet_id if adoption else "",
                adopt_owned=adoption.owned if adoption else False,
            ),
        )
        adopts_bucket = bool(adoption and adoption.bucket_id and plan.object_storage is not None)
        export(
            ProjectOutputs,
            project_id=project.project_id,
            project_created=project.created,
            tenant_id=plan.tenant_id,
            region=plan.region,
            network_id=network.network_id,
            subnet_id=network.subnet_id,
            network_owned=network.owned,
            npa_fingerprint=fingerprint + (STORAGE_IDENTITY_PENDING if adopts_bucket else ""),
        )
        if plan.cost_basis:
            export(ProjectOutputs, cost_basis=plan.cost_basis)
        if plan.object_storage is not None:
            storage = ObjectStorage(
                f"{plan.project_key}-storage",
                ObjectStorageArgs(
                    cloud=cloud,
                    profile=profile,
                    fleet=plan.fleet,
                    project_key=plan.project_key,
                    tenant_id=plan.tenant_id,
                    project_id=project.project_id,
                    region=plan.region,
                    storage_class=plan.object_storage.storage_class,
                    size_gibibytes=plan.object_storage.size_gibibytes,
                    bucket_name=plan.object_storage.bucket_name,
                    adopt_bucket_id=adoption.bucket_id if adoption else "",
                    adopt_created=adoption.bucket_created if adoption else False,
                ),
            )
            export(
                ProjectOutputs,
                bucket_id=storage.bucket_id,
                bucket_name=storage.bucket_name,
                storage_access_key_id=storage.access_key_id,
                storage_secret_access_key=storage.secret_access_key,
                storage_verified=storage.verified,
                # What a teardown reads as proof of ownership (engine/teardown/run.py); never a secret.
                bucket_created=storage.bucket_created,
                storage_service_account_id=storage.service_account_id,
                storage_service_account_created=storage.service_account_created,
                storage_key_id=storage.key_id,
            )

    return program


def cluster_module_args(
    plan: ClusterPlan, cloud: str, profile: str, project_id: Any, subnet_id: Any
) -> dict[str, Any]:
    """What a cluster's Terraform module is run with, from its plan: the one mapping of a plan onto the
    arguments of its backend's cluster component (`K8sTrainingClusterArgs`, ...) and onto the
    properties the preview's Terraform plan reads (operations/common.terraform_plan). The ids may be
    Pulumi outputs in a program, plain strings in a preview."""
    return {
        "cloud": cloud,
        "profile": profile,
        "fleet": plan.fleet,
        "project_key": plan.project_key,
        "cluster": plan.cluster_name,
        "work_key": plan.stack,
        "identity": {
            "tenant_id": plan.tenant_id,
            "parent_id": project_id,
            "region": plan.region,
            "subnet_id": subnet_id,
        },
        "tfvars": plan.tfvars,
        "runtime_tfvars": plan.runtime_tfvars,
        "recipe": plan.recipe.to_inputs() if plan.recipe is not None else {},
    }


def project_identity(plan: ClusterPlan, project_stack_ready: bool) -> tuple[Any, Any]:
    """The cluster's project and subnet ids: the project stack's outputs (a reused subnet from the plan),
    or placeholders in a preview of a fleet whose project stack has not been deployed yet. Inside a
    program only."""
    import pulumi

    from npa_pulumi.engine.automation import stack_reference_name

    if not project_stack_ready:
        return PENDING, plan.subnet_id or PENDING
    ref = pulumi.StackReference(stack_reference_name(plan.project_stack))
    project_id = required_output(ref, ProjectOutputs, "project_id")
    return project_id, plan.subnet_id or required_output(ref, ProjectOutputs, "subnet_id")


@dataclass(frozen=True)
class InClusterStage:
    """What the in-cluster stage built. `gate_args`: which cluster, through which cloud, and what the
    in-cluster steps depend on (a new cluster or replaced node groups fetch the credentials again and run
    the gates again), the arguments every gate step takes besides its own."""

    gate_args: dict[str, Any]
    credentials: Any  # components.ClusterCredentials
    objects: Any  # components.FleetClusterObjects


def in_cluster_stage(
    plan: ClusterPlan,
    cloud: str,
    profile: str,
    cluster: Any,
    *,
    rtx_driver_repositories: dict[str, str] | None = None,
    kuberay: Any = None,
) -> InClusterStage:
    """The in-cluster stage every cluster stack shares, under `cluster` (its component): the cluster's
    credentials, a Kubernetes provider from them and the fleet's own objects; exports `kube_server` and
    `fleet_namespace`. `kuberay`: the fleet's RayTemplate, if any. Inside a program only."""
    import pulumi

    from npa_pulumi.components import (
        ClusterCredentials,
        ClusterCredentialsArgs,
        FleetClusterObjects,
        FleetClusterObjectsArgs,
    )
    from npa_pulumi.plan.naming import kube_context_name

    gate_args: dict[str, Any] = {
        "cloud": cloud,
        "profile": profile,
        "fleet": plan.fleet,
        "project_key": plan.project_key,
        "tenant_id": plan.tenant_id,
        "region": plan.region,
        "cluster_id": cluster.cluster_id,
        "context": kube_context_name(plan.fleet, plan.project_key, plan.cluster_name),
        "node_group_ids": cluster.node_group_ids,
    }
    credentials = ClusterCredentials(
        f"{plan.cluster_name}-credentials",
        ClusterCredentialsArgs(**gate_args),
        pulumi.ResourceOptions(parent=cluster),
    )
    objects = FleetClusterObjects(
        f"{plan.cluster_name}-in-cluster",
        FleetClusterObjectsArgs(
            kubeconfig=credentials.kubeconfig,
            fleet=plan.fleet,
            project_key=plan.project_key,
            cluster=plan.cluster_name,
            rtx_driver_repositories=rtx_driver_repositories,
            kuberay=kuberay,
        ),
        pulumi.ResourceOptions(parent=cluster),
    )
    export(ClusterOutputs, kube_server=credentials.server, fleet_namespace=objects.namespace)
    return InClusterStage(gate_args, credentials, objects)


def export_ungated() -> None:
    """No gate ran (`--no-health-gate`, or no in-cluster stage): say so instead of pretending one did."""
    export(ClusterOutputs, lifecycle="deployed", validation="skipped")
