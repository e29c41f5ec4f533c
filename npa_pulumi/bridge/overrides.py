"""npa-pulumi's own Terraform override files for the default k8s-training recipe (`--cloud nebius` with
neither `--recipe-dir` nor `--recipe-ref`).

Upstream k8s-training has no MIG pin variables, no RTX driver profile and no settable managed driver preset
(`local.device_preset` is hardcoded). Rather than carrying a patched copy, the default recipe is upstream
at a pinned commit plus files written here, generated from the tables below:

* declaration files (`npa_fleet_variables.tf`): new variables and locals under names upstream does not
  use, so the tfvars renderer's MIG, RTX and driver-preset variables are declared (a new block cannot come
  from an override file: Terraform refuses an override with no original);
* override files (`npa_fleet_override.tf`, Terraform's documented merge, argument by argument, into the
  existing block of the same type and labels): they wire those variables into upstream's own blocks — the
  driver preset into `locals.device_preset`, the GPU Operator release's values (MIG pins, the RTX driver
  CRD patch, the repository configuration) and the toolkit's runtime config source into
  `module "gpu-operator"` and its release.

Every block and argument an override touches is listed as a `Touch` and checked against the recipe's own
files (parsed with python-hcl2) before anything is written: a revision that lacks one is refused, naming
it, before any terraform runs. Upstream's files are never copied or edited.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from npa_pulumi.errors import NpaError
from npa_pulumi.kube.gpu_operator import REVISION_VALUE_KEY
from npa_pulumi.plan.recipe_surface import MIG_RECIPE_VARIABLES
from npa_pulumi.runtime import hcl

# nebius-solutions-library at the V4 (DRA/reservation) revision: the commit the default recipe fetches.
DEFAULT_K8S_TRAINING_COMMIT: Final = "b6c8b3813dcc391ecc5ed8ffd1f1b8ebc67dd70c"

ROOT_MODULE: Final = "k8s-training"
GPU_OPERATOR_MODULE: Final = "modules/gpu-operator"
DECLARATIONS_FILE: Final = "npa_fleet_variables.tf"
OVERRIDE_FILE: Final = "npa_fleet_override.tf"
AUTH_OVERRIDE_FILE: Final = "npa_fleet_auth_override.tf"
VERSIONS_OVERRIDE_FILE: Final = "npa_fleet_versions_override.tf"
OWNED_FILES: Final = frozenset({DECLARATIONS_FILE, OVERRIDE_FILE, AUTH_OVERRIDE_FILE, VERSIONS_OVERRIDE_FILE})
# The variable through which the bridge names the profile Terraform authenticates as (bridge/credentials.py).
PROFILE_VARIABLE: Final = "npa_nebius_profile"
# A pool's own Kubernetes version (null: the cluster's `k8s_version`), so a pinned pool stays where it is
# while the control plane moves; upstream sets `version = var.k8s_version` on the cluster and every node
# group. By variable, the upstream node-group blocks it overrides (gb300 is the GPU pool on GB300 racks).
NODE_GROUP_VERSION_VARIABLES: Final[Mapping[str, tuple[str, ...]]] = {
    "npa_fleet_cpu_nodes_version": ("cpu-only",),
    "npa_fleet_gpu_nodes_version": ("gpu", "gb300"),
}
_NODE_GROUP = "nebius_mk8s_v1_node_group"


class OverrideTargetError(NpaError):
    """The recipe lacks a block or argument npa-pulumi's override files merge into (refused before any
    change)."""

    kind = "recipe"


@dataclass(frozen=True)
class Touch:
    """One argument of one upstream block that an override file sets.

    `block` is the block's type and labels (`("module", "gpu-operator")`, `("locals",)`); `argument` the
    argument (for `locals`, the local's name). `expects`:
    * `string` / `object` / `expression`: what the original argument's value is (a quoted string, an
      object, any expression);
    * `input:<type>`: a `module` block's argument that the called module must declare as a variable of
      that type (the override may add it to the call);
    * `meta`: a meta-argument (`count`) of an existing block: only the block must exist.
    """

    module: str
    block: tuple[str, ...]
    argument: str
    expects: str

    def describe(self) -> str:
        head = self.block[0] + "".join(f' "{label}"' for label in self.block[1:])
        return f"{self.module}: {head} {{ {self.argument} }}"


@dataclass(frozen=True)
class OverrideFile:
    """A file npa-pulumi writes into one module directory of the materialized recipe."""

    module: str
    name: str
    text: str
    touches: tuple[Touch, ...] = ()
    declares: tuple[str, ...] = ()  # variables a declaration file adds (upstream must not declare them)
    adds: tuple[tuple[str, ...], ...] = ()  # blocks a declaration file adds (upstream must not have them)


@dataclass(frozen=True)
class OverrideSet:
    files: tuple[OverrideFile, ...]

    def touches(self) -> list[Touch]:
        return [touch for file in self.files for touch in file.touches]


# The GPU Operator chart's keys for the MIG pins (values of the marketplace release's `set`).
MIG_PIN_KEYS: Final[Mapping[str, str]] = {
    "gpu_operator_version": "operator.version",
    "gpu_driver_version": "driver.version",
    "gpu_device_plugin_version": "devicePlugin.version",
    "gpu_gfd_version": "gfd.version",
    "gpu_mig_manager_version": "migManager.version",
}
# The Helm `set` key of the RTX values' revision annotation, as an HCL string literal writes it.
REVISION_VALUE_KEY_HCL: Final = REVISION_VALUE_KEY.replace("\\", "\\\\")
DEFAULT_DRIVER_PRESET: Final = "cuda13.0"  # upstream's hardcoded local.device_preset

_HEADER = "# Written by npa-pulumi (npa_pulumi/bridge/overrides.py); not part of upstream k8s-training.\n"


def _variable(name: str, type_: str, default: str, description: str) -> str:
    return (
        f'variable "{name}" {{\n  description = "{description}"\n  type        = {type_}\n'
        f"  default     = {default}\n}}\n"
    )


_CLUSTER = "nebius_mk8s_v1_cluster.k8s-cluster"


def _kube_token_args() -> str:
    """`nebius mk8s v1 cluster get-token` for this cluster, as the profile the bridge names."""
    return (
        f'concat(["mk8s", "v1", "cluster", "get-token", "--id", {_CLUSTER}.id, "--format", "json"], '
        f'var.{PROFILE_VARIABLE} == "" ? [] : ["--profile", var.{PROFILE_VARIABLE}])'
    )


def _root_declarations() -> OverrideFile:
    assert set(MIG_PIN_KEYS) | {"gpu_mig_with_reboot", "gpu_operator_rdma_enabled"} == set(
        MIG_RECIPE_VARIABLES
    )
    parts = [_HEADER]
    parts.append(
        _variable(
            "gpu_nodes_driver_preset",
            "string",
            f'"{DEFAULT_DRIVER_PRESET}"',
            "Managed (driverfull) image driver preset; upstream hardcodes local.device_preset.",
        )
    )
    parts.append(
        _variable(
            "gpu_operator_rtx_driver_profile",
            "any",
            "null",
            "RTX rendering profile: {platform, preset, values, revision} for the GPU Operator release.",
        )
    )
    for name in MIG_PIN_KEYS:
        parts.append(
            _variable(name, "string", "null", f"MIG pin: the GPU Operator chart's {MIG_PIN_KEYS[name]}.")
        )
    parts.append(_variable("gpu_mig_with_reboot", "bool", "null", "MIG Manager reconciles with a reboot."))
    parts.append(
        _variable(
            PROFILE_VARIABLE, "string", '""', "Nebius CLI profile Terraform authenticates as; empty: active."
        )
    )
    # Upstream V4 configures no `provider "nebius"` block (a declaration, not an override, for that reason):
    # authenticate through the CLI profile, which the provider refreshes, rather than one minted token.
    parts.append(
        'provider "nebius" {\n'
        f'  profile = {{ name = var.{PROFILE_VARIABLE} == "" ? null : var.{PROFILE_VARIABLE} }}\n'
        "}\n"
    )
    parts.append(_variable("gpu_operator_rdma_enabled", "bool", "null", "The GPU Operator driver's RDMA."))
    for name in NODE_GROUP_VERSION_VARIABLES:
        pool = name.removeprefix("npa_fleet_").removesuffix("_version")
        parts.append(
            _variable(name, "string", "null", f"The {pool} pool's Kubernetes version; null: var.k8s_version.")
        )
    # The exec plugin's arguments for the auth override (npa_fleet_auth_override.tf): declared here, because
    # Terraform merges an override file's locals only into locals that a primary file already defines.
    parts.append(f"locals {{\n  npa_fleet_kube_token_args = {_kube_token_args()}\n}}\n")
    pins = "\n".join(f'    "{key}" = var.{name}' for name, key in MIG_PIN_KEYS.items())
    reboot, rdma = "var.gpu_mig_with_reboot", "var.gpu_operator_rdma_enabled"
    rtx = "local.npa_fleet_rtx"
    lines = [
        "locals {",
        "  npa_fleet_rtx = var.gpu_operator_rtx_driver_profile",
        "  npa_fleet_mig_values = {",
        pins,
        f'    "migManager.env[0].name"  = {reboot} == null ? null : "WITH_REBOOT"',
        f'    "migManager.env[0].value" = {reboot} == null ? null : tostring({reboot})',
        f'    "driver.rdma.enabled"     = {rdma} == null ? null : tostring({rdma})',
        "  }",
        "  npa_fleet_rtx_values = {",
        f'    "nebius.nvidiaDriverCRDPatch.profiles[0].platform" = try(tostring({rtx}.platform), null)',
        f'    "nebius.nvidiaDriverCRDPatch.profiles[0].preset"   = try(tostring({rtx}.preset), null)',
        f'    "driver.rdma.enabled"                              = {rtx} == null ? null : "false"',
        '    "driver.repoConfig.configMapName" = try(',
        f"      tostring({rtx}.values.driver.repoConfig.configMapName), null",
        "    )",
        # The chart's `daemonsets.annotations` (every operand's pod template): a new revision of the values
        # or of the repository files rolls the driver pods, which a subPath mount would never show them.
        f'    "{REVISION_VALUE_KEY_HCL}" = try(tostring({rtx}.revision), null)',
        "  }",
        "  npa_fleet_gpu_operator_values = merge(",
        "    { for key, value in local.npa_fleet_mig_values : key => value if value != null },",
        "    { for key, value in local.npa_fleet_rtx_values : key => value if value != null },",
        "  )",
        f'  npa_fleet_gpu_operator_revision = try(tostring({rtx}.revision), "")',
        "  npa_fleet_toolkit_config_source = try(",
        f"    tostring({rtx}.values.toolkit.env[0].value), var.gpu_operator_toolkit_config_source",
        "  )",
        "}",
    ]
    parts.append("\n".join(lines) + "\n")
    declares = (
        "gpu_nodes_driver_preset",
        "gpu_operator_rtx_driver_profile",
        *MIG_RECIPE_VARIABLES,
        PROFILE_VARIABLE,
        *NODE_GROUP_VERSION_VARIABLES,
    )
    touches = (Touch(ROOT_MODULE, ("variable", "gpu_operator_toolkit_config_source"), "type", "string"),)
    adds = (("provider", "nebius"),)
    return OverrideFile(ROOT_MODULE, DECLARATIONS_FILE, "\n".join(parts), touches, declares, adds)


def _root_override() -> OverrideFile:
    text = (
        _HEADER + "# Merged by Terraform into upstream's blocks of the same type and labels.\n\n"
        "locals {\n  device_preset = var.gpu_nodes_driver_preset\n}\n\n"
        "# Every operator-driver cluster (MIG included) goes through the marketplace GPU Operator release,\n"
        "# which carries the fleet's pins; upstream's gpu-operator-custom path is not used.\n"
        'module "gpu-operator" {\n'
        "  count                 = local.use_driverfull_gpu ? 0 : 1\n"
        "  toolkit_config_source = local.npa_fleet_toolkit_config_source\n"
        "  npa_fleet_values      = local.npa_fleet_gpu_operator_values\n"
        "  npa_fleet_revision    = local.npa_fleet_gpu_operator_revision\n"
        "}\n\n"
        'module "gpu-operator-custom" {\n  count = 0\n}\n'
    )
    touches = (
        Touch(ROOT_MODULE, ("locals",), "device_preset", "string"),
        Touch(ROOT_MODULE, ("locals",), "use_driverfull_gpu", "expression"),
        Touch(ROOT_MODULE, ("module", "gpu-operator"), "count", "meta"),
        Touch(ROOT_MODULE, ("module", "gpu-operator"), "toolkit_config_source", "input:string"),
        Touch(ROOT_MODULE, ("module", "gpu-operator-custom"), "count", "meta"),
    )
    return OverrideFile(ROOT_MODULE, OVERRIDE_FILE, text, touches)


def _root_auth_override() -> OverrideFile:
    """Profile authentication (refreshable) instead of one minted token: the Nebius provider reads the CLI
    profile, and the Kubernetes-side providers get their token from the profile-bound exec plugin
    (`nebius mk8s v1 cluster get-token`) whenever the bridge passes no `iam_token` (bridge/credentials.py).
    With a token (other credential paths, `NPA_REUSE_IAM_TOKEN`), upstream's `token = var.iam_token` holds."""
    exec_object = (
        '{\n      api_version = "client.authentication.k8s.io/v1beta1"\n      command     = "nebius"\n'
        "      args        = local.npa_fleet_kube_token_args\n    }"
    )
    dynamic_exec = (
        '  dynamic "exec" {\n    for_each = var.iam_token == null ? [1] : []\n    content {\n'
        '      api_version = "client.authentication.k8s.io/v1beta1"\n      command     = "nebius"\n'
        "      args        = local.npa_fleet_kube_token_args\n    }\n  }\n"
    )
    text = (
        _HEADER
        + 'variable "iam_token" {\n  default = null\n}\n\n'
        + 'provider "helm" {\n  kubernetes = {\n'
        + f"    host                   = {_CLUSTER}.status.control_plane.endpoints.public_endpoint\n"
        + f"    cluster_ca_certificate = {_CLUSTER}.status.control_plane.auth.cluster_ca_certificate\n"
        + "    token                  = var.iam_token\n"
        + f"    exec                   = var.iam_token == null ? {exec_object} : null\n"
        + "  }\n}\n\n"
        + 'provider "kubernetes" {\n'
        + dynamic_exec
        + "}\n\n"
        + 'provider "kubectl" {\n'
        + dynamic_exec
        + "}\n"
    )
    touches = (
        Touch(ROOT_MODULE, ("variable", "iam_token"), "type", "string"),
        Touch(ROOT_MODULE, ("provider", "helm"), "kubernetes", "object"),
        Touch(ROOT_MODULE, ("provider", "kubernetes"), "token", "expression"),
        Touch(ROOT_MODULE, ("provider", "kubectl"), "token", "expression"),
    )
    return OverrideFile(ROOT_MODULE, AUTH_OVERRIDE_FILE, text, touches)


def _root_versions_override() -> OverrideFile:
    """Each node group's `version` from its pool's variable, the cluster's `k8s_version` when that is null
    (a pool rendered at the cluster's version renders no variable: plan/tfvars.py)."""
    parts = [_HEADER + "# Merged by Terraform into upstream's node groups: a pool may run its own version.\n"]
    touches = []
    for name, blocks in NODE_GROUP_VERSION_VARIABLES.items():
        for label in blocks:
            parts.append(
                f'resource "{_NODE_GROUP}" "{label}" {{\n'
                f"  version = var.{name} == null ? var.k8s_version : var.{name}\n}}\n"
            )
            touches.append(Touch(ROOT_MODULE, ("resource", _NODE_GROUP, label), "version", "expression"))
    touches.append(Touch(ROOT_MODULE, ("variable", "k8s_version"), "type", "string"))
    return OverrideFile(ROOT_MODULE, VERSIONS_OVERRIDE_FILE, "\n".join(parts), tuple(touches))


def _operator_declarations() -> OverrideFile:
    text = (
        _HEADER
        + _variable(
            "npa_fleet_values", "map(string)", "{}", "npa-pulumi's GPU Operator values (MIG pins, RTX)."
        )
        + _variable(
            "npa_fleet_revision", "string", '""', "Changes the release when write-only inputs change."
        )
    )
    return OverrideFile(
        GPU_OPERATOR_MODULE, DECLARATIONS_FILE, text, (), ("npa_fleet_values", "npa_fleet_revision")
    )


def _operator_override() -> OverrideFile:
    values = "merge(local.helm_values, var.npa_fleet_values)"
    text = (
        _HEADER + 'resource "nebius_applications_v1alpha1_k8s_release" "this" {\n'
        "  sensitive = {\n"
        f"    set     = {values}\n"
        f"    version = sha256(jsonencode([{values}, var.npa_fleet_revision]))\n"
        "  }\n}\n"
    )
    touches = (
        Touch(GPU_OPERATOR_MODULE, ("locals",), "helm_values", "expression"),
        Touch(
            GPU_OPERATOR_MODULE,
            ("resource", "nebius_applications_v1alpha1_k8s_release", "this"),
            "sensitive",
            "object",
        ),
    )
    return OverrideFile(GPU_OPERATOR_MODULE, OVERRIDE_FILE, text, touches)


def default_overrides() -> OverrideSet:
    """The default recipe's files, in the order they are checked and written."""
    return OverrideSet(
        (
            _root_declarations(),
            _root_override(),
            _root_auth_override(),
            _root_versions_override(),
            _operator_declarations(),
            _operator_override(),
        )
    )


# --- checking against the recipe -------------------------------------------------------------------


def _is_override(path: Path) -> bool:
    return path.name == "override.tf" or path.name.endswith("_override.tf")


def _parse_module(directory: Path) -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.tf")):
        if _is_override(path) or path.name in OWNED_FILES:
            continue
        try:
            documents.append(hcl.loads(path.read_text(encoding="utf-8")))
        except Exception as err:  # python-hcl2 raises lark's exceptions on malformed HCL
            raise OverrideTargetError(f"cannot parse {path}: {' '.join(str(err).split())[:200]}") from None
    return documents


def _unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text


def _blocks(documents: Iterable[dict[str, Any]], block: tuple[str, ...]) -> list[dict[str, Any]]:
    """The bodies of every block of this type and labels."""
    found: list[dict[str, Any]] = []
    for document in documents:
        for entry in document.get(block[0], []) or []:
            body: Any = entry
            for label in block[1:]:
                matched = {_unquote(k): v for k, v in body.items()} if isinstance(body, dict) else {}
                body = matched.get(label)
                if body is None:
                    break
            if isinstance(body, dict):
                found.append(body)
    return found


def _value_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, list):
        return "list"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str) and value.startswith('"') and "${" not in value:
        return "string"
    return "expression"


def _normalized_type(value: Any) -> str:
    return re.sub(r"\s+", "", str(value)).removeprefix("${").removesuffix("}")


def _declared_variables(documents: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    variables: dict[str, dict[str, Any]] = {}
    for document in documents:
        for entry in document.get("variable", []) or []:
            for name, body in entry.items():
                if isinstance(body, dict):
                    variables[_unquote(name)] = body
    return variables


def _check_touch(touch: Touch, library: Path, parsed: dict[str, list[dict[str, Any]]]) -> str | None:
    documents = parsed[touch.module]
    bodies = _blocks(documents, touch.block)
    head = touch.block[0] + "".join(f' "{label}"' for label in touch.block[1:])
    if not bodies:
        return f"{touch.module} has no {head} block"
    if touch.expects == "meta":
        return None
    if touch.expects.startswith("input:"):
        source = next((_unquote(str(b["source"])) for b in bodies if "source" in b), None)
        if source is None or not source.startswith("."):
            return f"{touch.module}: {head} has no local source to check {touch.argument} against"
        called = (library / touch.module / source).resolve()
        key = str(called.relative_to(library.resolve())) if called.is_relative_to(library.resolve()) else ""
        if key not in parsed:
            if not called.is_dir():
                return f"{touch.module}: {head} calls {source}, which is missing"
            parsed[key] = _parse_module(called)
        declared = _declared_variables(parsed[key]).get(touch.argument)
        want = touch.expects.removeprefix("input:")
        if declared is None:
            return f"{touch.module}: {head} calls {source}, which declares no variable {touch.argument}"
        if _normalized_type(declared.get("type", "any")) != want:
            got = _normalized_type(declared.get("type"))
            return f"{touch.module}: {head}'s input {touch.argument} is {got}, not {want}"
        return None
    if touch.block[0] == "variable" and touch.argument == "type":
        declared_type = _normalized_type(bodies[0].get("type", "any"))
        return (
            None
            if declared_type == touch.expects
            else f"{touch.describe()} is {declared_type}, not {touch.expects}"
        )
    values = [body[touch.argument] for body in bodies if touch.argument in body]
    if not values:
        return f"{touch.module}: {head} has no argument {touch.argument}"
    kind = _value_kind(values[0])
    if touch.expects != "expression" and kind != touch.expects:
        return f"{touch.describe()} is {'an' if kind[0] in 'aeiou' else 'a'} {kind}, not a {touch.expects}"
    return None


def problems(overrides: OverrideSet, library: Path) -> list[str]:
    """What `library` (a checkout holding `k8s-training/` and `modules/`) lacks that the override files
    merge into, or already declares that the declaration files would add; empty when they apply."""
    parsed: dict[str, list[dict[str, Any]]] = {}
    found: list[str] = []
    for file in overrides.files:
        if file.module not in parsed:
            directory = library / file.module
            if not directory.is_dir():
                found.append(f"{file.module}/ is missing")
                parsed[file.module] = []
                continue
            parsed[file.module] = _parse_module(directory)
        clash = sorted(set(file.declares) & set(_declared_variables(parsed[file.module])))
        if clash:
            found.append(f"{file.module} already declares {', '.join(clash)} (the overrides need updating)")
        for block in file.adds:
            if any("alias" not in body for body in _blocks(parsed[file.module], block)):
                head = block[0] + "".join(f' "{label}"' for label in block[1:])
                found.append(f"{file.module} already has a {head} block (the overrides need updating)")
    for touch in overrides.touches():
        if parsed.get(touch.module) == [] and not (library / touch.module).is_dir():
            continue
        problem = _check_touch(touch, library, parsed)
        if problem:
            found.append(problem)
    return found


def check(overrides: OverrideSet, library: Path, revision: str) -> None:
    """Refuse, naming each missing target, a `library` (the fetched checkout) the files cannot apply to."""
    found = problems(overrides, library)
    if found:
        raise OverrideTargetError(
            f"the k8s-training revision {revision} cannot take npa-pulumi's override files: "
            + "; ".join(found)
            + " (pass --recipe-dir or --recipe-ref with a recipe that declares the fleet's variables)"
        )


def write(overrides: OverrideSet, work_root: Path) -> list[Path]:
    """Write the files into the materialized recipe under `work_root` (after `check`)."""
    written: list[Path] = []
    for file in overrides.files:
        path = work_root / file.module / file.name
        if not path.is_file() or path.read_text() != file.text:
            path.write_text(file.text)
        written.append(path)
    return written


def apply(overrides: OverrideSet, library: Path, work_root: Path, revision: str) -> list[Path]:
    """`check` the library, then `write` the files: nothing is written when a target is missing."""
    check(overrides, library, revision)
    return write(overrides, work_root)
