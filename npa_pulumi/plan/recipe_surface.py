"""The k8s-training variable surface the tfvars renderer can emit, and reading a recipe's declared variables.

`RECIPE_VARIABLES` is the complete list of variable names `render_tfvars` may produce, in emission order.
A recipe is read for the ones it declares, and the renderer leaves out the rest where the value is the
module's own default anyway, refusing otherwise. The default recipe (upstream k8s-training at the pinned
commit plus npa-pulumi's override files, which declare the MIG, RTX and driver-preset variables upstream
lacks) declares the identity variables, which are never rendered and always arrive as `TF_VAR_*` at run
time, and every variable that carries a cluster's settings (tests/unit/plan/test_tfvars_recipe.py, on the
real module).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from npa_pulumi.errors import UserInputError
from npa_pulumi.runtime import hcl

# Variables written to terraform.tfvars.json (file) or passed as TF_VAR_* (runtime), in emission order.
RECIPE_VARIABLES: Final[tuple[str, ...]] = (
    "cluster_name",
    "k8s_version",
    "ssh_public_key",
    "mk8s_cluster_public_endpoint",
    "enable_k8s_node_group_sa",
    "enable_egress_gateway",
    "cpu_nodes_public_ips",
    "gpu_nodes_public_ips",
    "cpu_nodes_preemptible",
    "gpu_nodes_preemptible",
    "gpu_operator_rtx_driver_profile",
    "mig_strategy",
    "gpu_nodes_driverfull_image",
    "gpu_nodes_driver_preset",
    "custom_driver",
    "mig_parted_config",
    "gpu_operator_version",
    "gpu_driver_version",
    "gpu_device_plugin_version",
    "gpu_gfd_version",
    "gpu_mig_manager_version",
    "gpu_mig_with_reboot",
    "gpu_operator_rdma_enabled",
    "cpu_nodes_fixed_count",
    "cpu_nodes_platform",
    "cpu_nodes_preset",
    "cpu_disk_size",
    "gpu_nodes_fixed_count_per_group",
    "gpu_node_groups",
    "gpu_nodes_platform",
    "gpu_nodes_preset",
    "gpu_nodes_reservation_policy",
    "gpu_disk_size",
    "npa_fleet_cpu_nodes_version",
    "npa_fleet_gpu_nodes_version",
    "enable_gpu_cluster",
    "infiniband_fabric",
    "enable_filestore",
    "existing_filestore",
    "filestore_disk_size_gibibytes",
    "filestore_mount_path",
    "filestore_mount_tag",
    "filesystem_csi",
    "enable_nebius_o11y_agent",
    "enable_grafana",
    "enable_prometheus",
    "collectK8sClusterMetrics",
    "enable_kuberay_cluster",
    "kuberay_cpu_cluster",
    "enable_kuberay_service",
    "enable_opa_gatekeeper",
    "loki",
)

# Passed as TF_VAR_* at run time, never written to disk or plan output (a capacity block id is private).
RUNTIME_VARIABLES: Final[tuple[str, ...]] = ("gpu_nodes_reservation_policy",)

# Target identity and the token: the bridge supplies these as TF_VAR_*; the renderer never emits them.
IDENTITY_VARIABLES: Final[tuple[str, ...]] = ("tenant_id", "parent_id", "region", "subnet_id", "iam_token")

# The seven inputs a recipe must declare to honour RTX PRO 6000 MIG's pinned versions.
MIG_RECIPE_VARIABLES: Final[tuple[str, ...]] = (
    "gpu_operator_version",
    "gpu_driver_version",
    "gpu_device_plugin_version",
    "gpu_gfd_version",
    "gpu_mig_manager_version",
    "gpu_mig_with_reboot",
    "gpu_operator_rdma_enabled",
)


class RecipeError(UserInputError):
    """A recipe directory that cannot be read, or that cannot honour a target's settings."""

    kind = "invalid-recipe"


def read_recipe_variables(recipe_dir: Path) -> set[str]:
    """Names of the variables a Terraform root module declares (all its *.tf and *.tf.json files).

    `recipe_dir` may be the root module itself or a checkout holding it as `k8s-training/`.
    """
    root = _module_root(Path(recipe_dir))
    declared: set[str] = set()
    for path in sorted(root.glob("*.tf")):
        declared |= _hcl_variables(path)
    for path in sorted(root.glob("*.tf.json")):
        declared |= _json_variables(path)
    return declared


def _module_root(recipe_dir: Path) -> Path:
    if not recipe_dir.is_dir():
        raise RecipeError(f"recipe directory not found: {recipe_dir}")
    if any(recipe_dir.glob("*.tf")) or any(recipe_dir.glob("*.tf.json")):
        return recipe_dir
    nested = recipe_dir / "k8s-training"
    if nested.is_dir() and (any(nested.glob("*.tf")) or any(nested.glob("*.tf.json"))):
        return nested
    raise RecipeError(f"no Terraform files in {recipe_dir} (nor in {nested})")


def _hcl_variables(path: Path) -> set[str]:
    try:
        document: dict[str, Any] = hcl.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise RecipeError(f"cannot read {path}: {err}") from None
    except Exception as err:  # python-hcl2 raises lark's exceptions on malformed HCL
        raise RecipeError(f"cannot parse {path}: {' '.join(str(err).split())[:200]}") from None
    names: set[str] = set()
    for block in document.get("variable", []) or []:
        if isinstance(block, dict):
            names |= {_unquote(name) for name in block}
    return names


def _json_variables(path: Path) -> set[str]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise RecipeError(f"cannot read {path}: {err}") from None
    variables = document.get("variable", {}) if isinstance(document, dict) else {}
    if isinstance(variables, dict):
        return set(variables)
    if isinstance(variables, list):
        return {name for item in variables if isinstance(item, dict) for name in item}
    return set()


def _unquote(name: str) -> str:
    return name[1:-1] if len(name) >= 2 and name[0] == name[-1] == '"' else name
