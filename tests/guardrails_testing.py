"""Stand-ins for the product's resources, for exercising the pack (tests only: not part of the wheel).

The classes register the contract's type tokens (docs/resource-contract.md) with trivial providers, so a
test program can build a deliberately violating stack directly, bypassing the spec validator. They live
in an importable module on purpose: the engine's dynamic-provider host is a separate Python process that
unpickles the provider by module reference (a class defined in a test's inline program would not import);
the engine tests put tests/ on its PYTHONPATH.

The `*_props` helpers return compliant property sets that tests then break one field at a time.
"""

from __future__ import annotations

import copy
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider

BLOCK_ID = "capacityblockgroup-e00testblock0042"


class _EchoProvider(ResourceProvider):
    """Creates nothing anywhere: the outputs are the inputs."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_="stand-in", outs=dict(props))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=olds != news)


class TerraformModule(Resource, module="npa", name="TerraformModule"):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_EchoProvider(), name, dict(props), opts)


class Project(Resource, module="npa", name="Project"):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_EchoProvider(), name, dict(props), opts)


class Bucket(Resource, module="npa", name="Bucket"):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_EchoProvider(), name, dict(props), opts)


class AccessKey(Resource, module="npa", name="AccessKey"):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_EchoProvider(), name, dict(props), opts)


class K8sTrainingCluster(pulumi.ComponentResource):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("npa:fleet:K8sTrainingCluster", name, dict(props), opts)
        self.register_outputs({})


# --- compliant property sets ------------------------------------------------------------------------


def recipe_facts(tag: str = "data", path: str = "/mnt/data") -> dict[str, Any]:
    return {
        "filesystem_attachments": [
            {"node_group": "cpu", "attach_mode": "READ_WRITE", "mount_tag": tag},
            {"node_group": "gpu", "attach_mode": "READ_WRITE", "mount_tag": tag},
        ],
        "filesystem_mount": {"path": path, "tag": tag, "fs_type": "virtiofs", "options": "defaults,nofail"},
    }


def base_tfvars() -> dict[str, Any]:
    """A managed-image 1 x H100 cluster with a shared filesystem, no reservation."""
    return {
        "cluster_name": "c1",
        "gpu_nodes_preemptible": False,
        "mig_strategy": "none",
        "gpu_nodes_driverfull_image": True,
        "gpu_nodes_driver_preset": "cuda13.0",
        "custom_driver": False,
        "cpu_nodes_fixed_count": 1,
        "gpu_nodes_fixed_count_per_group": 1,
        "gpu_node_groups": 1,
        "gpu_nodes_platform": "gpu-h100-sxm",
        "gpu_nodes_preset": "1gpu-16vcpu-200gb",
        "gpu_disk_size": "1023",
        "enable_gpu_cluster": False,
        "enable_filestore": True,
        "existing_filestore": "",
        "filestore_disk_size_gibibytes": 1024,
        "filestore_mount_path": "/mnt/data",
        "filestore_mount_tag": "data",
    }


def _copy(value: Any) -> Any:
    # Outputs cannot be deep-copied outside serialization; plain data is copied so callers can mutate.
    return value if isinstance(value, pulumi.Output) else copy.deepcopy(value)


def module_props(tfvars: Any = None, runtime_tfvars: Any = None, facts: Any = None) -> dict[str, Any]:
    """TerraformModule inputs; any argument may also be a pulumi Output (e.g. Output.secret(...))."""
    return {
        "fleet": "f1",
        "project_key": "p1",
        "cluster": "c1",
        "module_kind": "k8s-training",
        "tfvars": _copy(tfvars if tfvars is not None else base_tfvars()),
        "runtime_tfvars": _copy(runtime_tfvars if runtime_tfvars is not None else {}),
        "recipe": {
            "source": "default",
            "location": "https://github.com/nebius/nebius-solutions-library@b6c8b3813dcc391ecc5ed8ffd1f1b8ebc67dd70c",
            "digest": "0" * 64,
        },
        "recipe_facts": _copy(facts if facts is not None else recipe_facts()),
        "identity_env": [
            "TF_VAR_tenant_id",
            "TF_VAR_parent_id",
            "TF_VAR_region",
            "TF_VAR_subnet_id",
            "TF_VAR_iam_token",
        ],
    }


def reservation(block: str = BLOCK_ID, policy: str = "STRICT") -> dict[str, Any]:
    return {"gpu_nodes_reservation_policy": {"policy": policy, "reservation_ids": [block]}}


def reserved_tfvars() -> dict[str, Any]:
    """Two reserved 1-GPU workers (rendered 1 per group x 2 groups, reference §4 item 12)."""
    tfvars = base_tfvars()
    tfvars.update({"gpu_nodes_fixed_count_per_group": 1, "gpu_node_groups": 2})
    return tfvars


def mig_tfvars() -> dict[str, Any]:
    tfvars = base_tfvars()
    tfvars.update(
        {
            "k8s_version": "1.34",
            "mig_strategy": "mixed",
            "gpu_nodes_driverfull_image": False,
            "custom_driver": True,
            "mig_parted_config": "all-balanced",
            "gpu_operator_version": "v26.3.3",
            "gpu_driver_version": "580.173.02",
            "gpu_device_plugin_version": "v0.19.3",
            "gpu_gfd_version": "v0.19.3",
            "gpu_mig_manager_version": "v0.14.2",
            "gpu_mig_with_reboot": True,
            "gpu_operator_rdma_enabled": False,
            "gpu_nodes_fixed_count_per_group": 1,
            "gpu_node_groups": 2,
            "gpu_nodes_platform": "gpu-rtx6000",
            "gpu_nodes_preset": "1gpu-24vcpu-218gb",
            "gpu_disk_size": "128",
        }
    )
    tfvars.pop("gpu_nodes_driver_preset")
    return tfvars


def fabric_tfvars(fabric: str = "fabric-3") -> dict[str, Any]:
    """One clustered 8 x H100 SXM node on a fabric, managed-image driver."""
    tfvars = base_tfvars()
    tfvars.update(
        {
            "gpu_nodes_fixed_count_per_group": 1,
            "gpu_node_groups": 1,
            "gpu_nodes_platform": "gpu-h100-sxm",
            "gpu_nodes_preset": "8gpu-128vcpu-1600gb",
            "enable_gpu_cluster": True,
            "infiniband_fabric": fabric,
        }
    )
    return tfvars


def cluster_props(
    block: Any = "",
    gpu_driver_mode: str = "managed-image",
    allow_unsafe_nvswitch_operator: bool = False,
    nvswitch_topology: bool = False,
    mig_enabled: bool = False,
) -> dict[str, Any]:
    return {
        "fleet": "f1",
        "project_key": "p1",
        "cluster": "c1",
        "capacity_block_group": block,
        "gpu_driver_mode": gpu_driver_mode,
        "allow_unsafe_nvswitch_operator": allow_unsafe_nvswitch_operator,
        "nvswitch_topology": nvswitch_topology,
        "mig_enabled": mig_enabled,
    }


# --- hand-built validation args (pulumi-notes §C "Unit-testing packs") ---------------------------------


def resource_args(
    resource_type: str,
    props: dict[str, Any],
    *,
    name: str = "r",
    urn: str | None = None,
    parent: str | None = None,
    additional_secret_outputs: tuple[str, ...] = (),
    config: dict[str, Any] | None = None,
    stack_tags: dict[str, str] | None = None,
) -> Any:
    """ResourceValidationArgs as the SDK builds them: props behind the unknown-checking proxy."""
    from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs
    from pulumi_policy.proxy import unknown_checking_proxy

    urn = urn or f"urn:pulumi:s::p::{resource_type}::{name}"
    opts = PolicyResourceOptions(
        False, [], None, [], PolicyCustomTimeouts(0, 0, 0), list(additional_secret_outputs), parent
    )
    return ResourceValidationArgs(
        resource_type, unknown_checking_proxy(props), urn, name, opts, None, config, stack_tags or {}
    )


def stack_args(
    stack_tags: dict[str, str], resource_types: tuple[str, ...] = (), config: dict[str, Any] | None = None
) -> Any:
    from pulumi_policy import (
        PolicyCustomTimeouts,
        PolicyResource,
        PolicyResourceOptions,
        StackValidationArgs,
    )

    resources = [
        PolicyResource(
            t,
            {},
            f"urn:pulumi:s::p::{t}::r{i}",
            f"r{i}",
            PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None),
            None,
            None,
            [],
            {},
        )
        for i, t in enumerate(resource_types)
    ]
    return StackValidationArgs(resources, config, stack_tags)


def run_policy(policy: Any, args: Any) -> list[str]:
    """Call a policy's validate like the SDK does; the reported messages."""
    messages: list[str] = []
    policy.validate(args, lambda message, urn=None: messages.append(message))
    return messages
