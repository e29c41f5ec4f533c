"""The guardrails as plain functions: (resource, config, context) -> list of problems.

Each function returns short problem statements (no remediation: the pack appends the catalog's hint) and
never includes a capacity-block id or a credential value: those are described, not shown.
Properties read here are the ones docs/resource-contract.md lists.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy.proxy import UnknownValueError

from npa_pulumi.policies import catalog

from .facts import ClusterFacts, ClusterRegistry, Subject, cluster_facts
from .values import (
    MASK,
    as_bool,
    as_int,
    as_list,
    as_mapping,
    as_str,
    fingerprint,
    gpus_per_node,
    is_secret,
    reveal,
    show,
)


@dataclass(frozen=True)
class CheckContext:
    registry: ClusterRegistry
    # True when secrets reach the pack as wrappers, so a plain value really is plaintext.
    secrets_visible: bool

    def parent_facts(self, subject: Subject) -> ClusterFacts | None:
        return self.registry.get(subject.parent)


Check = Callable[[Subject, Mapping[str, Any], CheckContext], list[str]]

RESERVATION_KEY = "gpu_nodes_reservation_policy"


# --- shared readers for the TerraformModule -------------------------------------------------------


def _tfvars(subject: Subject) -> Mapping[str, Any]:
    return as_mapping(subject.props.get("tfvars")) or {}


def _runtime_tfvars(subject: Subject) -> tuple[Mapping[str, Any], bool, bool]:
    """(runtime_tfvars, present, visibly secret)."""
    if "runtime_tfvars" not in subject.props:
        return {}, False, False
    raw = subject.props["runtime_tfvars"]
    value, secret = reveal(raw, "runtime_tfvars")
    return (value if isinstance(value, Mapping) else {}), value is not None, secret


def _gpu_nodes(tfvars: Mapping[str, Any]) -> int:
    """Total GPU workers: per-group count x groups (reference §4 item 12)."""
    per_group = as_int(tfvars.get("gpu_nodes_fixed_count_per_group")) or 0
    groups = as_int(tfvars.get("gpu_node_groups"))
    if groups is None:
        groups = 1 if per_group else 0
    return max(per_group, 0) * max(groups, 0)


def _platform(tfvars: Mapping[str, Any]) -> str:
    return as_str(tfvars.get("gpu_nodes_platform")) or ""


def _preset(tfvars: Mapping[str, Any]) -> str:
    return as_str(tfvars.get("gpu_nodes_preset")) or ""


def _nvswitch(tfvars: Mapping[str, Any]) -> tuple[bool, str]:
    """NVSwitch topology per reference §3.2, with a safe description of why."""
    gpus = _gpu_nodes(tfvars)
    if gpus <= 0:
        return False, ""
    clustering = as_bool(tfvars.get("enable_gpu_cluster")) is True
    platform = _platform(tfvars)
    per_node = gpus_per_node(_preset(tfvars)) or 0
    sxm_nvl = "-sxm" in platform or "-nvl" in platform
    if clustering:
        return True, "GPU clustering is on"
    if per_node > 1 and sxm_nvl:
        return True, f"{per_node} GPUs per node on {platform}"
    return False, ""


# --- strict-capacity-reservation ------------------------------------------------------------------


def check_strict_capacity_reservation(
    subject: Subject, config: Mapping[str, Any], ctx: CheckContext
) -> list[str]:
    if subject.resource_type == catalog.K8S_TRAINING_CLUSTER:
        facts = cluster_facts(subject.urn, subject.props)
        if facts.bound and ctx.secrets_visible and facts.block_is_secret is False:
            return [
                f"capacity_block_group ({MASK}) is a plain string, so the block id would be stored in "
                "plaintext state; it must be a Pulumi secret"
            ]
        return []
    if subject.resource_type != catalog.TERRAFORM_MODULE:
        return []

    problems: list[str] = []
    tfvars = _tfvars(subject)
    runtime, _, runtime_secret = _runtime_tfvars(subject)
    parent = ctx.parent_facts(subject)

    plain_policy = tfvars.get(RESERVATION_KEY)
    if RESERVATION_KEY in tfvars and plain_policy is not None:
        problems.append(
            f"tfvars carry {RESERVATION_KEY} (written to terraform.tfvars.json and plaintext state); the "
            "reservation and its block id must travel only in the secret runtime_tfvars"
        )
    in_runtime = RESERVATION_KEY in runtime and runtime.get(RESERVATION_KEY) is not None
    if in_runtime and ctx.secrets_visible and not runtime_secret:
        problems.append(
            f"runtime_tfvars is not a Pulumi secret, so the block id ({MASK}) would be stored in plaintext"
        )
    policy_obj = runtime.get(RESERVATION_KEY) if in_runtime else plain_policy

    if policy_obj is None:
        if parent is not None and parent.bound:
            problems.append(
                "the cluster binds its GPU pool to a capacity block but the module renders no "
                f"{RESERVATION_KEY}: the pool would not be held to the reserved block"
            )
        return problems

    policy_map = as_mapping(policy_obj)
    if policy_map is None:
        problems.append(f"{RESERVATION_KEY} is not an object {{policy, reservation_ids}}")
        return problems

    policy = as_str(policy_map.get("policy"))
    if not policy:
        problems.append(f"{RESERVATION_KEY} has no `policy`; it must be STRICT")
    elif policy.strip().upper() == "AUTO":
        problems.append(
            "reservation policy is AUTO, which may place GPU nodes outside the reserved block; "
            "it must be STRICT"
        )
    elif policy != "STRICT":
        shown = repr(policy) if re.fullmatch(r"[A-Za-z_]{1,16}", policy) else MASK
        problems.append(f"reservation policy is {shown}; it must be exactly STRICT")

    ids = as_list(policy_map.get("reservation_ids"))
    id_values = [as_str(i) for i in ids] if ids is not None else []
    if ids is None or len(id_values) != 1 or not (id_values[0] or "").strip():
        count = "no" if ids is None else str(len(id_values))
        problems.append(
            f"reservation_ids holds {count} usable block id(s); exactly one capacity block id is required"
        )
    elif parent is not None and parent.bound is not None:
        block = (id_values[0] or "").strip()
        if parent.bound is False:
            problems.append(
                f"the module reserves a capacity block ({MASK}) although its cluster binds none "
                "(capacity_block_group is empty)"
            )
        elif parent.block_fingerprint is not None and fingerprint(block) != parent.block_fingerprint:
            problems.append(
                f"reservation_ids names a different capacity block ({MASK}) than the cluster's "
                "capacity_block_group"
            )

    if _gpu_nodes(tfvars) <= 0:
        problems.append("a capacity reservation is rendered but the GPU pool has no nodes")
    if as_bool(tfvars.get("gpu_nodes_preemptible")) is True:
        problems.append(
            "the reserved GPU pool is preemptible (gpu_nodes_preemptible = true); reserved capacity cannot be"
        )
    return problems


# --- filestore-nofail-mount -----------------------------------------------------------------------


def _is_configured(fact: Any, configured: str, variable: str) -> bool:
    """The recipe uses the configured value: literally, or by referencing the variable that carries it
    (facts read from HCL may keep `var.X` / `${var.X}` where the value is not a literal)."""
    value = (as_str(fact) or "").strip()
    # `${filestore_mount_path}` in a cloud-init template: the template variable the recipe binds from the
    # variable of that name (upstream passes local.filestore.mount_path, which is var.filestore_mount_path).
    return value in (configured, f"var.{variable}", f"${{var.{variable}}}", f"${{{variable}}}")


def check_filestore_nofail_mount(subject: Subject, config: Mapping[str, Any], ctx: CheckContext) -> list[str]:
    if subject.resource_type != catalog.TERRAFORM_MODULE:
        return []
    tfvars = _tfvars(subject)
    if as_bool(tfvars.get("enable_filestore")) is not True:
        return []

    problems: list[str] = []
    path = as_str(tfvars.get("filestore_mount_path"))
    tag = as_str(tfvars.get("filestore_mount_tag"))
    facts = as_mapping(subject.props.get("recipe_facts"))
    if "filestore_mount_tag" not in tfvars and facts is not None:
        # A recipe that takes no tag (upstream hardcodes `data`; planning refuses any other): the tag is the
        # recipe's own, and every attachment must still agree with the mount.
        tag = as_str((as_mapping(facts.get("filesystem_mount")) or {}).get("tag"))
    if not path or not posixpath.isabs(path) or re.search(r"\s", path):
        problems.append(f"filestore_mount_path is {show(path)}; it must be an absolute path without spaces")
    if not tag or re.search(r"[\s,]", tag):
        problems.append(
            f"filestore_mount_tag is {show(tag)}; it must be a non-empty tag without spaces or commas"
        )

    if facts is None:
        problems.append(
            "recipe_facts are missing, so the recipe's filesystem attachments and mount cannot be proven"
        )
        return problems

    attachments = [as_mapping(a) or {} for a in (as_list(facts.get("filesystem_attachments")) or [])]
    for group in config.get("required_node_groups") or ("cpu", "gpu"):
        mine = [a for a in attachments if as_str(a.get("node_group")) == group]
        if not mine:
            problems.append(f"the recipe does not attach the filesystem to the {group} node group")
            continue
        for att in mine:
            mode = as_str(att.get("attach_mode")) or ""
            if mode.upper() != "READ_WRITE":
                problems.append(
                    f"the {group} node group attaches the filesystem {show(mode)}, not READ_WRITE"
                )
            if tag and not _is_configured(att.get("mount_tag"), tag, "filestore_mount_tag"):
                problems.append(
                    f"the {group} node group attaches tag {show(att.get('mount_tag'))}, "
                    f"not filestore_mount_tag {tag!r}"
                )

    mount = as_mapping(facts.get("filesystem_mount"))
    if mount is None:
        problems.append(
            "the recipe does not mount the shared filesystem on the nodes (filesystem_mount is null)"
        )
        return problems
    if path and not _is_configured(mount.get("path"), path, "filestore_mount_path"):
        problems.append(f"the recipe mounts at {show(mount.get('path'))}, not filestore_mount_path {path!r}")
    if tag and not _is_configured(mount.get("tag"), tag, "filestore_mount_tag"):
        problems.append(f"the recipe mounts tag {show(mount.get('tag'))}, not filestore_mount_tag {tag!r}")
    fs_type = as_str(mount.get("fs_type"))
    if fs_type != "virtiofs":
        problems.append(f"the mount's filesystem type is {show(fs_type)}, not virtiofs")
    options = {o.strip() for o in (as_str(mount.get("options")) or "").split(",") if o.strip()}
    for required in config.get("required_mount_options") or ("nofail",):
        if required not in options:
            problems.append(
                f"the mount options {show(mount.get('options'))} lack `{required}`: "
                "a node may not boot when the "
                "filesystem is missing"
            )
    return problems


# --- mig-version-pinning --------------------------------------------------------------------------

_MIG_VERSION_KEYS = (
    "gpu_operator_version",
    "gpu_driver_version",
    "gpu_device_plugin_version",
    "gpu_gfd_version",
    "gpu_mig_manager_version",
)


def _mig_requested(tfvars: Mapping[str, Any], parent: ClusterFacts | None) -> bool:
    if parent is not None and parent.mig_enabled is True:
        return True
    strategy = (as_str(tfvars.get("mig_strategy")) or "").strip().lower()
    if strategy not in ("", "none"):
        return True
    return bool(as_str(tfvars.get("mig_parted_config"))) or bool(
        as_str(tfvars.get("gpu_mig_manager_version"))
    )


def check_mig_version_pinning(subject: Subject, config: Mapping[str, Any], ctx: CheckContext) -> list[str]:
    pins = {**catalog.MIG_PINS, **config}
    if subject.resource_type == catalog.K8S_TRAINING_CLUSTER:
        if as_bool(subject.props.get("mig_enabled")) is not True:
            return []
        cluster_problems: list[str] = []
        mode = as_str(subject.props.get("gpu_driver_mode"))
        if mode != "operator":
            cluster_problems.append(f"MIG needs gpu_driver_mode operator, got {show(mode)}")
        block, _ = reveal(subject.props.get("capacity_block_group"), "capacity_block_group")
        if not (isinstance(block, str) and block.strip()):
            cluster_problems.append("MIG needs strict-reserved GPU workers but capacity_block_group is empty")
        return cluster_problems
    if subject.resource_type != catalog.TERRAFORM_MODULE:
        return []

    tfvars = _tfvars(subject)
    parent = ctx.parent_facts(subject)
    if not _mig_requested(tfvars, parent):
        return []

    problems: list[str] = []
    for key in _MIG_VERSION_KEYS:
        actual = as_str(tfvars.get(key))
        if actual != pins[key]:
            problems.append(f"{key} is {show(actual)}, pinned {pins[key]!r}")
    for key, pin_key in (("mig_strategy", "mig_strategy"), ("mig_parted_config", "mig_parted_config")):
        actual = as_str(tfvars.get(key))
        if actual != pins[pin_key]:
            problems.append(f"{key} is {show(actual)}, must be {pins[pin_key]!r}")
    if _platform(tfvars) != pins["gpu_platform"]:
        problems.append(
            f"gpu_nodes_platform is {show(_platform(tfvars))}, MIG runs only on {pins['gpu_platform']!r}"
        )
    if _preset(tfvars) != pins["gpu_preset"]:
        problems.append(f"gpu_nodes_preset is {show(_preset(tfvars))}, MIG needs {pins['gpu_preset']!r}")
    workers = _gpu_nodes(tfvars)
    if workers != int(pins["gpu_workers"]):
        problems.append(f"{workers} GPU worker(s) rendered; MIG needs exactly {int(pins['gpu_workers'])}")
    disk = as_int(tfvars.get("gpu_disk_size"))
    if disk != int(pins["gpu_disk_size_gib"]):
        problems.append(
            f"gpu_disk_size is {show(tfvars.get('gpu_disk_size'))}, "
            f"MIG needs {int(pins['gpu_disk_size_gib'])} GiB"
        )

    runtime, _, _ = _runtime_tfvars(subject)
    reserved = runtime.get(RESERVATION_KEY) is not None or tfvars.get(RESERVATION_KEY) is not None
    if not reserved and not (parent is not None and parent.bound):
        problems.append("the MIG GPU workers are not bound to a capacity block (no strict reservation)")
    if as_bool(tfvars.get("gpu_nodes_preemptible")) is True:
        problems.append("the MIG GPU workers are preemptible")

    # As for NVSwitch: without the variable the recipe's own default, the operator driver, applies.
    if as_bool(tfvars.get("gpu_nodes_driverfull_image")) is True:
        problems.append(
            f"gpu_nodes_driverfull_image is {show(tfvars.get('gpu_nodes_driverfull_image'))}; "
            "MIG needs the operator driver (false, or the variable left out)"
        )
    if as_bool(tfvars.get("custom_driver")) is not True:
        problems.append(f"custom_driver is {show(tfvars.get('custom_driver'))}; MIG needs true")
    if as_bool(tfvars.get("gpu_mig_with_reboot")) is not True:
        problems.append(f"gpu_mig_with_reboot is {show(tfvars.get('gpu_mig_with_reboot'))}; MIG needs true")
    if as_bool(tfvars.get("gpu_operator_rdma_enabled")) is not False:
        problems.append(
            f"gpu_operator_rdma_enabled is {show(tfvars.get('gpu_operator_rdma_enabled'))}; MIG needs false"
        )
    k8s = as_str(tfvars.get("k8s_version"))
    if k8s and k8s != pins["k8s_version"]:
        problems.append(f"k8s_version is {k8s!r}; MIG is verified on {pins['k8s_version']!r}")
    if parent is not None and parent.gpu_driver_mode not in (None, "operator"):
        problems.append(
            f"the cluster's gpu_driver_mode is {show(parent.gpu_driver_mode)}; MIG needs operator"
        )
    return problems


# --- nvswitch-operator-acknowledged ---------------------------------------------------------------


def check_nvswitch_operator_acknowledged(
    subject: Subject, config: Mapping[str, Any], ctx: CheckContext
) -> list[str]:
    if subject.resource_type == catalog.K8S_TRAINING_CLUSTER:
        props = subject.props
        if (
            as_str(props.get("gpu_driver_mode")) == "operator"
            and as_bool(props.get("nvswitch_topology")) is True
            and as_bool(props.get("allow_unsafe_nvswitch_operator")) is not True
        ):
            return ["gpu_driver_mode operator on an NVSwitch topology without allow_unsafe_nvswitch_operator"]
        return []
    if subject.resource_type != catalog.TERRAFORM_MODULE:
        return []

    tfvars = _tfvars(subject)
    nvswitch, why = _nvswitch(tfvars)
    if not nvswitch:
        return []
    # The recipe's own default is the operator driver, so anything but an explicit managed image is operator.
    if as_bool(tfvars.get("gpu_nodes_driverfull_image")) is True:
        return []
    parent = ctx.parent_facts(subject)
    if parent is not None and parent.allow_unsafe_nvswitch_operator is True:
        return []
    where = "its cluster does not set" if parent is not None else "no K8sTrainingCluster parent carries"
    return [
        "the module renders the operator driver (gpu_nodes_driverfull_image is not true) "
        "on an NVSwitch topology "
        f"({why}) and {where} allow_unsafe_nvswitch_operator"
    ]


# --- gpu-cluster-needs-fabric ---------------------------------------------------------------------


def check_gpu_cluster_needs_fabric(
    subject: Subject, config: Mapping[str, Any], ctx: CheckContext
) -> list[str]:
    if subject.resource_type != catalog.TERRAFORM_MODULE:
        return []
    tfvars = _tfvars(subject)
    if as_bool(tfvars.get("enable_gpu_cluster")) is not True:
        return []
    problems: list[str] = []
    wanted = int(config.get("gpus_per_node") or 8)
    markers = tuple(config.get("platform_markers") or ("-sxm", "-nvl"))
    preset, platform = _preset(tfvars), _platform(tfvars)
    if _gpu_nodes(tfvars) <= 0:
        problems.append("enable_gpu_cluster is on but the cluster has no GPU nodes")
    if gpus_per_node(preset) != wanted:
        problems.append(f"gpu_nodes_preset {show(preset)} is not a {wanted}-GPU preset")
    if not any(m in platform for m in markers):
        problems.append(f"gpu_nodes_platform {show(platform)} is not fabric-capable ({'/'.join(markers)})")
    if not (as_str(tfvars.get("infiniband_fabric")) or "").strip():
        problems.append("infiniband_fabric is not set")
    return problems


# --- no-plaintext-credentials ---------------------------------------------------------------------

CREDENTIAL_WORDS = frozenset({"token", "secret", "passphrase", "password", "passwd", "apikey"})
# A credential-looking key ending in one of these names or locates the credential, not holds it.
NEUTRAL_LAST_WORDS = frozenset(
    {"env", "envs", "name", "names", "file", "path", "ref", "id", "ids", "kind", "type", "ttl"}
)


def key_words(key: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def looks_like_credential(key: str) -> bool:
    words = key_words(key)
    if not words or words[-1] in NEUTRAL_LAST_WORDS:
        return False
    return any(w in CREDENTIAL_WORDS for w in words) or "".join(words[-2:]) in CREDENTIAL_WORDS


def _plain_credentials(value: Any, path: str) -> Iterator[str]:
    """Dotted paths of credential-named keys that hold a plain, non-empty string."""
    if is_secret(value):
        return
    if isinstance(value, Mapping):
        for key in list(value.keys()):
            if not isinstance(key, str) or key.startswith("__"):
                continue  # __provider and other engine-internal keys
            child_path = f"{path}.{key}" if path else key
            try:
                child = value[key]
            except UnknownValueError:
                continue  # not known during preview; judged again on update
            if (
                looks_like_credential(key)
                and isinstance(child, str)
                and child.strip()
                and not is_secret(child)
            ):
                yield child_path
            else:
                yield from _plain_credentials(child, child_path)
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        try:
            items = [value[i] for i in range(len(value))]
        except (UnknownValueError, TypeError, KeyError):
            return
        for i, item in enumerate(items):
            yield from _plain_credentials(item, f"{path}[{i}]")


def check_no_plaintext_credentials(
    subject: Subject, config: Mapping[str, Any], ctx: CheckContext
) -> list[str]:
    if not subject.resource_type.startswith(catalog.FLEET_TYPE_PREFIXES):
        return []
    problems: list[str] = []
    if subject.resource_type == catalog.ACCESS_KEY and "secret" not in subject.additional_secret_outputs:
        problems.append(
            "npa:AccessKey does not list `secret` in additional_secret_outputs, "
            "so the access-key secret would be "
            "stored in plaintext state"
        )
    if ctx.secrets_visible:
        ignored = set(config.get("ignore_properties") or ())
        for path in _plain_credentials(subject.props, ""):
            if path not in ignored:
                problems.append(f"`{path}` looks like a credential and holds a plain string ({MASK})")
    return problems


# --- fleet-assets-retained ------------------------------------------------------------------------


def check_fleet_assets_retained(subject: Subject, config: Mapping[str, Any], ctx: CheckContext) -> list[str]:
    if subject.resource_type not in (catalog.PROJECT, catalog.BUCKET):
        return []
    kind = subject.resource_type.rsplit(":", 1)[-1]
    value = subject.props.get("retain_on_delete")
    if as_bool(value) is not True:
        return [f"npa:{kind} {subject.name!r} has retain_on_delete {show(value)}; a destroy would delete it"]
    return []


# --- gpu-node-group-replacement -------------------------------------------------------------------


def _resource_name(address: str) -> str:
    """`module.x.nebius_mk8s_v1_node_group.gpu[0]` -> `gpu`: the resource's own name, no index."""
    return address.rsplit(".", 1)[-1].split("[", 1)[0]


def check_gpu_node_group_replacement(
    subject: Subject, config: Mapping[str, Any], ctx: CheckContext
) -> list[str]:
    # The addresses come from `terraform plan` (the orchestrator writes them into this policy's config for
    # the one stack the run is for); a policy cannot see Terraform's plan through the resource's inputs.
    if subject.resource_type != catalog.TERRAFORM_MODULE:
        return []
    markers = [m.lower() for m in config.get("gpu_markers") or catalog.GPU_NODE_GROUP_MARKERS]
    planned = [str(a) for a in config.get("planned_replacements") or ()]
    gpu_groups = [a for a in planned if any(m in _resource_name(a).lower() for m in markers)]
    if not gpu_groups:
        return []
    return [
        f"Terraform's plan replaces GPU node group {', '.join(gpu_groups)}: its nodes are drained and "
        "re-provisioned and the workloads on them stop"
    ]


# --- kuberay-reviewed-template --------------------------------------------------------------------


def _ray_pod_problems(group: str, template: Mapping[str, Any]) -> Iterator[str]:
    spec = as_mapping(template.get("spec")) or {}
    containers = [as_mapping(c) or {} for c in as_list(spec.get("containers")) or []]
    if len(containers) != 1 or spec.get("initContainers"):
        yield f"{group}: {len(containers)} containers; the template runs exactly one, no sidecars"
    if not as_mapping(spec.get("nodeSelector")):
        yield f"{group}: no node selector; the template places Ray pods on the CPU node group"
    pod_security = as_mapping(spec.get("securityContext")) or {}
    for container in containers:
        image = as_str(container.get("image")) or ""
        if catalog.RAY_IMAGE_REPOSITORY not in image:
            yield f"{group}: image {image!r} is not the digest-pinned {catalog.RAY_IMAGE_REPOSITORY}..."
        security = as_mapping(container.get("securityContext")) or {}
        non_root = security.get("runAsNonRoot", pod_security.get("runAsNonRoot"))
        if as_bool(non_root) is not True:
            yield f"{group}: runAsNonRoot is {show(non_root)}, not true"
        if as_bool(security.get("allowPrivilegeEscalation")) is not False:
            yield f"{group}: allowPrivilegeEscalation is {show(security.get('allowPrivilegeEscalation'))}"
        if as_bool(security.get("privileged")) is True:
            yield f"{group}: the container is privileged"
        dropped = as_list((as_mapping(security.get("capabilities")) or {}).get("drop")) or []
        if "ALL" not in [as_str(d) for d in dropped]:
            yield f"{group}: capabilities drop {show(dropped)}, not ALL"


def check_kuberay_reviewed_template(
    subject: Subject, config: Mapping[str, Any], ctx: CheckContext
) -> list[str]:
    if subject.resource_type != catalog.RAYCLUSTER:
        return []
    labels = as_mapping((as_mapping(subject.props.get("metadata")) or {}).get("labels")) or {}
    if labels.get("app.kubernetes.io/managed-by") != "npa-pulumi":
        return []  # a user's own RayCluster is not the fleet's template
    spec = as_mapping(subject.props.get("spec")) or {}
    problems: list[str] = []
    version = as_str(spec.get("rayVersion")) or ""
    if not version.startswith(catalog.RAY_VERSION_PREFIX):
        problems.append(f"rayVersion is {version!r}, not Ray {catalog.RAY_VERSION_PREFIX}x")
    if as_bool(spec.get("enableInTreeAutoscaling")) is not False:
        problems.append(f"enableInTreeAutoscaling is {show(spec.get('enableInTreeAutoscaling'))}, not false")
    head = as_mapping(spec.get("headGroupSpec")) or {}
    problems += _ray_pod_problems("head", as_mapping(head.get("template")) or {})
    groups = [as_mapping(g) or {} for g in as_list(spec.get("workerGroupSpecs")) or []]
    if len(groups) != 1:
        problems.append(f"{len(groups)} worker groups; the template has exactly one CPU worker group")
    for group in groups:
        name = f"worker group {as_str(group.get('groupName')) or '?'}"
        sizes = {as_int(group.get(k)) for k in ("replicas", "minReplicas", "maxReplicas")}
        if len(sizes) != 1:
            problems.append(f"{name}: replicas, minReplicas and maxReplicas differ; the group is fixed-size")
        problems += _ray_pod_problems(name, as_mapping(group.get("template")) or {})
    return problems


# --- fleet-tags-present (stack) -------------------------------------------------------------------

CLUSTER_TYPES = (catalog.K8S_TRAINING_CLUSTER, catalog.TERRAFORM_MODULE)


def check_fleet_tags_present(
    stack_tags: Mapping[str, str], resource_types: list[str], config: Mapping[str, Any]
) -> list[str]:
    required = list(config.get("required_tags") or catalog.STACK_TAGS_REQUIRED)
    cluster_kind = config.get("cluster_kind") or "cluster"
    is_cluster = stack_tags.get("npa:kind") == cluster_kind or any(t in CLUSTER_TYPES for t in resource_types)
    if is_cluster:
        required += [
            t for t in (config.get("cluster_tags") or catalog.STACK_TAGS_CLUSTER) if t not in required
        ]
    missing = [t for t in required if not str(stack_tags.get(t) or "").strip()]
    if not missing:
        return []
    kind = "cluster stack" if is_cluster else "stack"
    return [f"the {kind} lacks the npa tag(s) {', '.join(missing)}"]


RESOURCE_CHECKS: dict[str, Check] = {
    "strict-capacity-reservation": check_strict_capacity_reservation,
    "filestore-nofail-mount": check_filestore_nofail_mount,
    "mig-version-pinning": check_mig_version_pinning,
    "nvswitch-operator-acknowledged": check_nvswitch_operator_acknowledged,
    "gpu-cluster-needs-fabric": check_gpu_cluster_needs_fabric,
    "no-plaintext-credentials": check_no_plaintext_credentials,
    "fleet-assets-retained": check_fleet_assets_retained,
    "gpu-node-group-replacement": check_gpu_node_group_replacement,
    "kuberay-reviewed-template": check_kuberay_reviewed_template,
}
