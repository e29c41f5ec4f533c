"""The `fleet-guardrails` CrossGuard policies as plain data: names, default levels, descriptions,
remediation hints and config schemas.

This is the single source of truth for the policy pack (`policies/fleet-guardrails/__main__.py` builds its
`ResourceValidationPolicy`/`StackValidationPolicy` objects from it) and for `npa-pulumi policy list`. It
must not import pulumi or pulumi_policy: the CLI lists policies without the engine or the SDK's gRPC stack.

Type tokens and inspected properties follow docs/resource-contract.md; change both together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

PACK_NAME = "fleet-guardrails"

Level = Literal["advisory", "mandatory", "remediate", "disabled"]
LEVELS: tuple[Level, ...] = ("advisory", "mandatory", "remediate", "disabled")

# Type tokens from docs/resource-contract.md. Python dynamic resources declared with
# `class X(pulumi.dynamic.Resource, module="npa", name="X")` surface as `pulumi-python:dynamic/npa:X`.
TERRAFORM_MODULE = "pulumi-python:dynamic/npa:TerraformModule"
PROJECT = "pulumi-python:dynamic/npa:Project"
BUCKET = "pulumi-python:dynamic/npa:Bucket"
ACCESS_KEY = "pulumi-python:dynamic/npa:AccessKey"
SERVICE_ACCOUNT = "pulumi-python:dynamic/npa:ServiceAccount"
NETWORK = "pulumi-python:dynamic/npa:Network"
SUBNET = "pulumi-python:dynamic/npa:Subnet"
K8S_TRAINING_CLUSTER = "npa:fleet:K8sTrainingCluster"
FLEET_PROJECT = "npa:fleet:FleetProject"
PROJECT_NETWORK = "npa:fleet:ProjectNetwork"
OBJECT_STORAGE = "npa:fleet:ObjectStorage"
# pulumi-kubernetes' token for a RayCluster (apiextensions.CustomResource: `kubernetes:<apiVersion>:<kind>`).
RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"
# The fleet's RayCluster template pins this Ray release, by image digest (npa_pulumi/kube/kuberay.py).
RAY_VERSION_PREFIX = "2.58."
RAY_IMAGE_REPOSITORY = "rayproject/ray@sha256:"

# Types whose props `no-plaintext-credentials` scans: the product's own resources. Third-party resources
# (e.g. a kubernetes Secret's `stringData`) follow their providers' rules and are left alone.
FLEET_TYPE_PREFIXES: tuple[str, ...] = ("npa:", "pulumi-python:dynamic/npa:")

# The RTX PRO 6000 MIG profile the product pins and live-verifies (npa-fleet reference §3.4, §4).
MIG_PINS: Mapping[str, Any] = MappingProxyType(
    {
        "gpu_operator_version": "v26.3.3",
        "gpu_driver_version": "580.173.02",
        "gpu_device_plugin_version": "v0.19.3",
        "gpu_gfd_version": "v0.19.3",
        "gpu_mig_manager_version": "v0.14.2",
        "mig_strategy": "mixed",
        "mig_parted_config": "all-balanced",
        "gpu_platform": "gpu-rtx6000",
        "gpu_preset": "1gpu-24vcpu-218gb",
        "gpu_workers": 2,
        "gpu_disk_size_gib": 128,
        "k8s_version": "1.34",
    }
)

# Resource-name fragments of the recipe's GPU node groups: `nebius_mk8s_v1_node_group.gpu[0]` upstream,
# the GB300 groups of the V3 recipe.
GPU_NODE_GROUP_MARKERS: tuple[str, ...] = ("gpu", "gb300")
# The policy whose config carries Terraform's planned node-group replacements (engine/orchestrator.py).
NODE_GROUP_REPLACEMENT_POLICY = "gpu-node-group-replacement"

STACK_TAGS_REQUIRED: tuple[str, ...] = ("npa:fleet", "npa:project", "npa:kind")
STACK_TAGS_CLUSTER: tuple[str, ...] = ("npa:cluster",)


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    level: Level
    kind: Literal["resource", "stack", "fleet"]
    description: str
    remediation: str
    applies_to: tuple[str, ...]
    # JSON-schema properties of the policy's config object (enforcementLevel is added by the SDK).
    config_schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def config_defaults(self) -> dict[str, Any]:
        return {k: v["default"] for k, v in self.config_schema.items() if "default" in v}

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "level": self.level,
            "kind": self.kind,
            "description": self.description,
            "remediation": self.remediation,
            "applies_to": list(self.applies_to),
            "config_schema": {k: dict(v) for k, v in self.config_schema.items()},
        }


def _str_prop(default: str, description: str) -> dict[str, Any]:
    return {"type": "string", "default": default, "description": description}


def _str_list_prop(default: tuple[str, ...], description: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {"type": "string", **extra},
        "default": list(default),
        "description": description,
    }


POLICIES: tuple[PolicyInfo, ...] = (
    PolicyInfo(
        name="strict-capacity-reservation",
        level="mandatory",
        kind="resource",
        description=(
            "A GPU pool bound to a capacity block renders reservation policy STRICT with exactly that block "
            "id (passed as a secret runtime variable): no AUTO, no missing policy, no preemptible reserved "
            "pool."
        ),
        remediation=(
            "bind the GPU pool through gpu_nodes.capacity_block_group and let the K8sTrainingCluster render "
            "runtime_tfvars.gpu_nodes_reservation_policy = {policy: STRICT, reservation_ids: [<that block>]} "
            "as a Pulumi secret; never set gpu_nodes_preemptible on a reserved pool or write the block id to "
            "tfvars"
        ),
        applies_to=(TERRAFORM_MODULE, K8S_TRAINING_CLUSTER),
    ),
    PolicyInfo(
        name="filestore-nofail-mount",
        level="mandatory",
        kind="resource",
        description=(
            "With a shared filesystem, the recipe attaches it READ_WRITE to every CPU and GPU node group "
            "with the configured tag and mounts it at the configured absolute path as virtiofs with `nofail` "
            "(without `nofail` a node may not boot when the filesystem is missing)."
        ),
        remediation=(
            "use a recipe whose node-group templates attach the filesystem READ_WRITE with "
            "filestore_mount_tag and whose cloud-init mounts that tag at filestore_mount_path as virtiofs "
            "with options `defaults,nofail`; set filestore_mount_path to an absolute path and "
            "filestore_mount_tag to a tag without spaces or commas"
        ),
        applies_to=(TERRAFORM_MODULE,),
        config_schema={
            "required_node_groups": _str_list_prop(
                ("cpu", "gpu"), "node groups that must carry a READ_WRITE attachment", enum=["cpu", "gpu"]
            ),
            "required_mount_options": _str_list_prop(
                ("nofail",), "options the filesystem mount must include"
            ),
        },
    ),
    PolicyInfo(
        name="mig-version-pinning",
        level="mandatory",
        kind="resource",
        description=(
            "A MIG-enabled cluster pins GPU Operator v26.3.3, driver 580.173.02, device plugin and GFD "
            "v0.19.3, MIG Manager v0.14.2, strategy mixed, config all-balanced, exactly two reserved "
            "gpu-rtx6000 / 1gpu-24vcpu-218gb workers with 128 GiB boot disks, and operator driver mode."
        ),
        remediation=(
            "declare `mig: {enabled: true, strategy: mixed, config: all-balanced}` only on a cluster with "
            "exactly two strict-reserved gpu-rtx6000 / 1gpu-24vcpu-218gb workers and 128 GiB disks, "
            "gpu_driver_mode operator, and keep the pinned versions (override them only through this "
            "policy's config)"
        ),
        applies_to=(TERRAFORM_MODULE, K8S_TRAINING_CLUSTER),
        config_schema={
            "gpu_operator_version": _str_prop(MIG_PINS["gpu_operator_version"], "pinned NVIDIA GPU Operator"),
            "gpu_driver_version": _str_prop(MIG_PINS["gpu_driver_version"], "pinned NVIDIA driver"),
            "gpu_device_plugin_version": _str_prop(
                MIG_PINS["gpu_device_plugin_version"], "pinned device plugin"
            ),
            "gpu_gfd_version": _str_prop(MIG_PINS["gpu_gfd_version"], "pinned GPU feature discovery"),
            "gpu_mig_manager_version": _str_prop(MIG_PINS["gpu_mig_manager_version"], "pinned MIG Manager"),
            "mig_strategy": _str_prop(MIG_PINS["mig_strategy"], "MIG strategy"),
            "mig_parted_config": _str_prop(MIG_PINS["mig_parted_config"], "mig-parted profile"),
            "gpu_platform": _str_prop(MIG_PINS["gpu_platform"], "GPU platform MIG runs on"),
            "gpu_preset": _str_prop(MIG_PINS["gpu_preset"], "GPU preset MIG runs on"),
            "gpu_workers": {
                "type": "integer",
                "minimum": 1,
                "default": MIG_PINS["gpu_workers"],
                "description": "exact number of GPU workers",
            },
            "gpu_disk_size_gib": {
                "type": "integer",
                "minimum": 1,
                "default": MIG_PINS["gpu_disk_size_gib"],
                "description": "GPU worker boot disk size",
            },
            "k8s_version": _str_prop(MIG_PINS["k8s_version"], "Kubernetes version, when the tfvars set one"),
        },
    ),
    PolicyInfo(
        name="nvswitch-operator-acknowledged",
        level="mandatory",
        kind="resource",
        description=(
            "Operator driver mode on an NVSwitch topology (GPUs and either GPU clustering or more than one "
            "GPU per node on an -sxm/-nvl platform) requires the explicit allow_unsafe_nvswitch_operator "
            "acknowledgement."
        ),
        remediation=(
            "use gpu_driver_mode managed-image (or auto) on NVSwitch nodes, or set "
            "allow_unsafe_nvswitch_operator: true on the cluster if you accept the operator driver there"
        ),
        applies_to=(TERRAFORM_MODULE, K8S_TRAINING_CLUSTER),
    ),
    PolicyInfo(
        name="gpu-cluster-needs-fabric",
        level="mandatory",
        kind="resource",
        description=(
            "GPU clustering (enable_gpu_cluster) is only allowed on fabric-capable 8-GPU SXM/NVL presets "
            "with an InfiniBand fabric."
        ),
        remediation=(
            "set enable_gpu_cluster: false, or use an 8-GPU -sxm/-nvl platform and preset and set "
            "infiniband_fabric"
        ),
        applies_to=(TERRAFORM_MODULE,),
        config_schema={
            "gpus_per_node": {
                "type": "integer",
                "minimum": 1,
                "default": 8,
                "description": "GPUs per node a fabric-capable preset has",
            },
            "platform_markers": _str_list_prop(
                ("-sxm", "-nvl"), "substrings marking a fabric-capable GPU platform"
            ),
        },
    ),
    PolicyInfo(
        name="no-plaintext-credentials",
        level="mandatory",
        kind="resource",
        description=(
            "Tokens, access-key secrets, passwords and passphrases on fleet resources are Pulumi secrets, "
            "and an npa:AccessKey's `secret` output is always stored as a secret."
        ),
        remediation=(
            "wrap the value with pulumi.Output.secret(...) (or read it from secret config), register "
            "npa:AccessKey with ResourceOptions(additional_secret_outputs=['secret']), and pass IAM tokens "
            "only as TF_VAR_* at run time (identity_env), never as a property"
        ),
        applies_to=FLEET_TYPE_PREFIXES,
        config_schema={
            "ignore_properties": _str_list_prop(
                (), "dotted property paths (e.g. `tfvars.token_ttl`) that look like credentials but are not"
            ),
        },
    ),
    PolicyInfo(
        name="fleet-assets-retained",
        level="mandatory",
        kind="resource",
        description=(
            "Created projects and buckets are retained on delete: npa:Project and npa:Bucket carry "
            "retain_on_delete: true (CrossGuard cannot see the resource option itself)."
        ),
        remediation=(
            "register npa:Project / npa:Bucket with ResourceOptions(retain_on_delete=True) and the input "
            "retain_on_delete=True, as docs/resource-contract.md (Retention) requires"
        ),
        applies_to=(PROJECT, BUCKET),
    ),
    PolicyInfo(
        name="gpu-node-group-replacement",
        level="advisory",
        kind="resource",
        description=(
            "Terraform's plan for a cluster replaces or deletes a GPU node group: every node in it is "
            "drained and re-provisioned, running workloads stop and reserved capacity is given back and "
            "requested again. npa-pulumi runs `terraform plan` for a changed, deployed cluster and hands "
            "the node groups it would replace to this policy; advisory by default, mandatory blocks it."
        ),
        remediation=(
            "change only what updates the node group in place (labels, taints, counts within the group), or "
            "roll the change out deliberately: drain the workloads, then run `up` with this policy "
            "advisory; make it mandatory (`--policy-config`, enforcementLevel) to stop such changes in CI"
        ),
        applies_to=(TERRAFORM_MODULE,),
        config_schema={
            "planned_replacements": _str_list_prop(
                (),
                "Terraform addresses of the node groups the cluster's plan replaces or deletes; npa-pulumi "
                "fills this in per stack from `terraform plan` (not set by hand)",
            ),
            "gpu_markers": _str_list_prop(
                GPU_NODE_GROUP_MARKERS,
                "substrings of a node group's Terraform resource name that mark it as a GPU node group",
            ),
        },
    ),
    PolicyInfo(
        name="kuberay-reviewed-template",
        level="mandatory",
        kind="resource",
        description=(
            "A RayCluster the fleet owns (app.kubernetes.io/managed-by: npa-pulumi) keeps the reviewed CPU "
            "template: Ray 2.58 from a digest-pinned rayproject/ray image in every container, in-tree "
            "autoscaling off, no sidecars, non-root pods without privilege escalation and with every "
            "capability dropped, a head and exactly one fixed-size worker group, each placed by node "
            "selector."
        ),
        remediation=(
            "create the fleet's RayCluster only through `kuberay:` in the spec (npa_pulumi/kube/kuberay.py "
            "builds it); run other Ray workloads as your own objects, not labelled as the fleet's"
        ),
        applies_to=(RAYCLUSTER,),
    ),
    PolicyInfo(
        name="fleet-tags-present",
        level="advisory",
        kind="stack",
        description=(
            "Every fleet stack carries the npa stack tags npa:fleet, npa:project and npa:kind, and cluster "
            "stacks also npa:cluster, so `pulumi stack ls --tag` and the fleet commands can find them."
        ),
        remediation=(
            "deploy through npa-pulumi (it tags every stack), or add the tags with `pulumi stack tag set "
            "<name> <value>`"
        ),
        applies_to=("stack",),
        config_schema={
            "required_tags": _str_list_prop(STACK_TAGS_REQUIRED, "tags every fleet stack must carry"),
            "cluster_tags": _str_list_prop(STACK_TAGS_CLUSTER, "extra tags a cluster stack must carry"),
            "cluster_kind": _str_prop("cluster", "the npa:kind value that marks a cluster stack"),
        },
    ),
)

# Policies about the whole fleet, which CrossGuard cannot judge (it sees one stack per engine run): npa-pulumi
# evaluates them over every stack of a preview (npa_pulumi/plan/budget.py) and reports them as this pack's
# results; their level and settings come from the same --policy-config file, under the same names.
FLEET_POLICIES: tuple[PolicyInfo, ...] = (
    PolicyInfo(
        name="fleet-monthly-budget",
        level="advisory",
        kind="fleet",
        description=(
            "A change whose monthly cost increase, or a fleet whose monthly total, exceeds the limit set in "
            "the policy config (prices: the shipped catalog or --prices; unknown prices are not counted). "
            "Off until a limit is set; advisory by default, mandatory fails the preview."
        ),
        remediation=(
            "shrink the change, or raise monthly_increase_limit_usd / monthly_total_limit_usd in the policy "
            "config once the spending is approved"
        ),
        applies_to=("fleet",),
        config_schema={
            "monthly_increase_limit_usd": {
                "type": "number",
                "minimum": 0,
                "description": "the most a change may add to the fleet's monthly on-demand cost, in USD",
            },
            "monthly_total_limit_usd": {
                "type": "number",
                "minimum": 0,
                "description": "the most the fleet may cost a month on demand after the change, in USD",
            },
        },
    ),
)

POLICY_NAMES: tuple[str, ...] = tuple(p.name for p in POLICIES)
FLEET_POLICY_NAMES: tuple[str, ...] = tuple(p.name for p in FLEET_POLICIES)


def get_policy(name: str) -> PolicyInfo:
    for info in POLICIES:
        if info.name == name:
            return info
    raise KeyError(f"no policy named {name!r} in {PACK_NAME}")


def catalog_document() -> dict[str, Any]:
    """The pack as one JSON-ready document (what `npa-pulumi policy list --output json` prints)."""
    return {"pack": PACK_NAME, "policies": [p.to_dict() for p in (*POLICIES, *FLEET_POLICIES)]}
