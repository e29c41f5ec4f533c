"""What a real mk8s cluster holds, as Kubernetes objects: the desired state the agent applies.

* One Node per instance of every RUNNING node group, shaped like the node Nebius would register: labels
  for the node group, platform and preset, the GPU product (`nvidia.com/gpu.*`, the MIG layout when the
  cluster runs MIG), the GPU taint, capacity and allocatable from the preset, and a boot id that changes
  only when the node reboots. `kwok.x-k8s.io/node: fake` hands the node to kwok, which keeps it Ready.
* What the k8s-training recipe installs (its "addons"): the GPU driver stack as DaemonSets (the device
  plugin for `managed-image`, the GPU operator's daemonsets for `operator`) and the CSI StorageClasses.
  KubeRay is not the recipe's: the fleet's cluster stack installs it, and the agent runs its operator.
* kwok Stages: kwok's own (node initialise / heartbeat, pod ready / complete / delete, node-not-ready)
  plus two of the simulator's, for GPU faults and for pods failing on a faulted node.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from npa_pulumi.kube.gpu_operator import REPO_CONFIG_DIRS, VALUES_REVISION_ANNOTATION

JSON = dict[str, Any]

MANAGED_BY = "app.kubernetes.io/managed-by"
LOCAL_CLOUD = "npa-local-cloud"
NODE_GROUP_ID = "nebius.com/node-group-id"
NODE_GROUP_NAME = "nebius.com/node-group-name"
CLUSTER_ID = "nebius.com/cluster-id"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_ERROR_CONDITION = "NebiusGPUError"
FABRIC_STATE = "nebius.ai/fabric-state"
NOT_READY_LABEL = "node-not-ready.stage.kwok.x-k8s.io"  # kwok's own chaos stage selects on it
GPU_ERROR_LABEL = "npa.local-cloud/gpu-error"
# Nebius' other node conditions (docs.nebius.com/kubernetes/maintenance, health-checks): the fault that
# sets each, the label the agent puts on the node, and what the condition says when it is True.
NEBIUS_CONDITIONS: dict[str, tuple[str, str, str, str]] = {
    # fault: (condition type, node label, reason, message)
    "maintenance_scheduled": (
        "NebiusMaintenanceScheduled",
        "npa.local-cloud/maintenance-scheduled",
        "MaintenanceScheduled",
        "maintenance of the node's instance is scheduled",
    ),
    "boot_disk_io_error": (
        "NebiusBootDiskIOError",
        "npa.local-cloud/boot-disk-io-error",
        "BootDiskIOError",
        "boot disk I/O errors for 30s",
    ),
}
POD_FAILURE_STAGE = "npa-pod-failure"
_BOOT_NAMESPACE = uuid.UUID("6f1b3d2a-8c4e-4f7a-9a51-1c2d3e4f5a6b")

# The GPU each platform carries, as the GPU feature discovery labels it.
GPU_PRODUCTS = {
    "h100": "NVIDIA-H100-80GB-HBM3",
    "h200": "NVIDIA-H200",
    "b200": "NVIDIA-B200",
    "b300": "NVIDIA-B300-SXM6-AC",
    "l40s": "NVIDIA-L40S",
    "rtx6000": "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
}
# RTX PRO 6000, MIG strategy mixed, config all-balanced: resources per physical GPU.
MIG_RESOURCES_PER_GPU = {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.24gb": 2, "nvidia.com/mig-2g.48gb": 1}


def preset_shape(preset: str) -> tuple[int, int, int]:
    """(GPUs, vCPUs, memory GiB) of a preset such as `8gpu-128vcpu-1600gb`; missing parts are 0."""

    def part(unit: str) -> int:
        match = re.search(rf"(\d+){unit}", preset.lower())
        return int(match.group(1)) if match else 0

    return part("gpu"), part("vcpu"), part("gb")


def gpu_product(platform: str) -> str:
    match = re.match(r"gpu-([a-z0-9]+?)(?:-sxm|-pcie|-[a-z])*$", platform.lower())
    family = match.group(1) if match else platform
    return GPU_PRODUCTS.get(family, f"NVIDIA-{family.upper()}")


def node_names(group: JSON) -> list[str]:
    """Stable instance names for a group's nodes: index i always maps to the same name, so scaling a
    group adds or removes names at the end and leaves the others alone."""
    suffix = group["id"].rsplit("-", 1)[-1][-8:]
    return [f"computeinstance-{suffix}{i:03d}" for i in range(int(group["target_node_count"]))]


def current_node_names(cluster: JSON, group: JSON) -> list[str]:
    """The names of a group's nodes now: each replaced node by the one that joined in its place."""
    replacements = cluster.get("node_replacements") or {}
    return [replaced_node_name(base, int(replacements.get(base, 0))) for base in node_names(group)]


def replaced_node_name(base: str, generation: int) -> str:
    """The node that joined in place of `base` after its `generation`-th replacement (a new instance: a
    new name, so a new boot id)."""
    return base if generation <= 0 else f"{base}-r{generation}"


def base_node_name(name: str) -> str:
    head, sep, tail = name.rpartition("-r")
    return head if sep and tail.isdigit() else name


def boot_id(node: str, reboots: int) -> str:
    return str(uuid.uuid5(_BOOT_NAMESPACE, f"{node}/{reboots}"))


def node_object(cluster: JSON, group: JSON, name: str, faults: JSON) -> JSON:
    addons = cluster.get("addons") or {}
    gpus, vcpus, memory_gib = preset_shape(group.get("preset") or "")
    labels = {
        **(group.get("labels") or {}),
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": group["platform"],
        "topology.kubernetes.io/region": cluster.get("region", ""),
        "nebius.com/platform": group["platform"],
        "nebius.com/preset": group.get("preset") or "",
        NODE_GROUP_ID: group["id"],
        NODE_GROUP_NAME: group["name"],
        CLUSTER_ID: cluster["id"],
        MANAGED_BY: LOCAL_CLOUD,
    }
    annotations = {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}
    resources: dict[str, str] = {"cpu": str(vcpus or 2), "memory": f"{memory_gib or 8}Gi", "pods": "110"}
    taints: list[JSON] = []
    if gpus:
        labels |= {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": gpu_product(group["platform"]),
            "nvidia.com/gpu.count": str(gpus),
        }
        taints.append(dict(GPU_TAINT))
        present = gpus - 1 if faults.get("gpu_missing") else gpus
        mig = addons.get("mig") or {}
        if mig:
            labels |= {
                "nvidia.com/mig.strategy": str(mig.get("strategy", "")),
                "nvidia.com/mig.config": str(mig.get("config", "")),
                "nvidia.com/mig.config.state": "success",
            }
            resources |= {key: str(count * present) for key, count in MIG_RESOURCES_PER_GPU.items()}
        else:
            resources["nvidia.com/gpu"] = str(present)
        if group.get("gpu_cluster_id"):
            labels["nebius.com/gpu-cluster-id"] = group["gpu_cluster_id"]
        platform = group["platform"].lower()
        if group.get("gpu_cluster_id") or (gpus > 1 and ("-sxm" in platform or "-nvl" in platform)):
            # NVSwitch nodes report their NVLink fabric (the fabric manager's state) once it is up.
            annotations[FABRIC_STATE] = "complete"
    if faults.get("not_ready"):
        labels[NOT_READY_LABEL] = "true"
    if faults.get("gpu_error"):
        labels[GPU_ERROR_LABEL] = "true"
    for fault, (_type, label, _reason, _message) in NEBIUS_CONDITIONS.items():
        if faults.get(fault):
            labels[label] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"taints": taints, "providerID": f"nebius://{name}"},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "nodeInfo": {"bootID": boot_id(name, int(faults.get("reboots", 0)))},
        },
    }


def desired_nodes(cluster: JSON, groups: list[JSON]) -> dict[str, JSON]:
    node_faults = cluster.get("node_faults") or {}
    nodes: dict[str, JSON] = {}
    for group in groups:
        if group.get("state") != "RUNNING":
            continue
        for name in current_node_names(cluster, group):
            nodes[name] = node_object(cluster, group, name, node_faults.get(name) or {})
    return nodes


# --------------------------------------------------------------------------------- the recipe's objects


def _labels(app: str) -> JSON:
    return {"app": app, "app.kubernetes.io/name": app, MANAGED_BY: "Helm", "helm.sh/chart": "k8s-training"}


def _namespace(name: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {MANAGED_BY: "Helm"}},
    }


def _gpu_daemonset(namespace: str, name: str, app: str, image: str = "") -> JSON:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": _labels(app)},
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": _labels(app)},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": app, "image": image or f"nvcr.io/nvidia/{app}:local"}],
                },
            },
        },
    }


def _storage_class(name: str, provisioner: str, default: bool) -> JSON:
    annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "annotations": annotations, "labels": {MANAGED_BY: "Helm"}},
        "provisioner": provisioner,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


def recipe_objects(cluster: JSON, repositories: list[str] | None = None) -> list[JSON]:
    """The objects the recipe's Helm releases leave in the cluster, in apply order (namespaces and CRDs
    before what lives in them). `repositories`: the files of the ConfigMap the RTX values' repoConfig
    names, as the agent read it from the API (None: no such ConfigMap)."""
    addons = cluster.get("addons") or {}
    objects: list[JSON] = [_storage_class("compute-csi-default-sc", "compute.csi.mk8s.nebius.ai", True)]
    if addons.get("filestore"):
        objects.append(_storage_class("csi-mounted-fs-path-sc", "mounted-fs-path.csi.nebius.ai", False))
        objects.append(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSIDriver",
                "metadata": {"name": "mounted-fs-path.csi.nebius.ai", "labels": {MANAGED_BY: "Helm"}},
                "spec": {
                    "attachRequired": False,
                    "podInfoOnMount": False,
                    "volumeLifecycleModes": ["Persistent"],
                },
            }
        )
    driver = addons.get("gpu_driver") or ""
    if driver:  # the container toolkit's runtime class, which GPU pods that need the driver's libraries use
        objects.append(
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": "nvidia", "labels": {MANAGED_BY: "Helm"}},
                "handler": "nvidia",
            }
        )
    if driver == "managed-image":
        objects += [
            _namespace("nvidia-device-plugin"),
            _gpu_daemonset(
                "nvidia-device-plugin", "nvidia-device-plugin-daemonset", "nvidia-device-plugin-daemonset"
            ),
        ]
    elif driver == "operator":
        rtx = rtx_driver(addons.get("rtx_driver") or {})
        faults = frozenset(f for f, on in (cluster.get("driver_faults") or {}).items() if on)
        objects += _gpu_operator(addons.get("mig") or {}, rtx, repositories, faults)
    return objects


# The GPU operator chart's defaults (what the recipe installs unless pinned): the MIG pins of
# npa_pulumi/spec/constants.py, and the container toolkit, which is not pinned by the spec.
OPERATOR_VERSIONS = {
    "operator": "v26.3.3",
    "driver": "580.173.02",
    "device_plugin": "v0.19.3",
    "gfd": "v0.19.3",
    "mig_manager": "v0.14.2",
    "toolkit": "v1.19.1",
}
CLUSTERPOLICY_CRD: JSON = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusterpolicies.nvidia.com"},
    "spec": {
        "group": "nvidia.com",
        "names": {
            "kind": "ClusterPolicy",
            "listKind": "ClusterPolicyList",
            "plural": "clusterpolicies",
            "singular": "clusterpolicy",
        },
        "scope": "Cluster",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


@dataclass(frozen=True)
class RtxDriver:
    """The RTX rendering profile's operator values, as the simulated operator applies them."""

    platform: str = ""
    preset: str = ""
    rdma: bool = False
    repo_config_map: str = ""
    toolkit_env: tuple[tuple[str, str], ...] = ()
    revision: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.platform)


def rtx_driver(addon: JSON) -> RtxDriver:
    """Read the recipe's `rtx_driver` addon ({platform, preset, values, revision}): the driver CRD patch's
    one profile, RDMA, repoConfig and the toolkit's environment. Without values (an older fleet), the
    pool alone."""
    values = addon.get("values") or {}
    profiles = ((values.get("nebius") or {}).get("nvidiaDriverCRDPatch") or {}).get("profiles") or [addon]
    pool = profiles[0] if profiles else {}
    driver = values.get("driver") or {}
    return RtxDriver(
        platform=str(pool.get("platform") or ""),
        preset=str(pool.get("preset") or ""),
        rdma=bool((driver.get("rdma") or {}).get("enabled")),
        repo_config_map=str((driver.get("repoConfig") or {}).get("configMapName") or ""),
        toolkit_env=tuple(
            (str(e.get("name")), str(e.get("value"))) for e in (values.get("toolkit") or {}).get("env") or []
        ),
        revision=str(addon.get("revision") or ""),
    )


# A template annotation only the stale-template fault sets: the "newer driver" its OnDelete update brings.
STALE_TEMPLATE_ANNOTATION = "npa.local/driver-update"


def _rtx_driver_daemonset(
    daemonset: JSON, rtx: RtxDriver, repositories: list[str], faults: frozenset[str] = frozenset()
) -> JSON:
    """The driver DaemonSet as the operator renders it from the RTX values: the NVIDIADriver's selector is
    exactly the pool (platform and preset), the values' revision is a template annotation (a change rolls
    the pods), and each repoConfig file is mounted read-only by `subPath` under the Ubuntu image's
    sources directory, from a volume of the ConfigMap with one item per file. Fault (`local-cloud fault
    driver`): `no_repo_mount` leaves the repository files unmounted (the volume stays); `stale_template`
    is `_stale_template`'s."""
    template = daemonset["spec"]["template"]
    template["metadata"]["annotations"] = {VALUES_REVISION_ANNOTATION: rtx.revision}
    template["spec"]["nodeSelector"] = {
        "nvidia.com/gpu.present": "true",
        "nebius.com/platform": rtx.platform,
        "nebius.com/preset": rtx.preset,
    }
    if rtx.repo_config_map and repositories:
        files = sorted(repositories)
        template["spec"]["volumes"] = [
            {
                "name": rtx.repo_config_map,
                "configMap": {"name": rtx.repo_config_map, "items": [{"key": f, "path": f} for f in files]},
            }
        ]
        if "no_repo_mount" in faults:
            return daemonset
        directory = REPO_CONFIG_DIRS["ubuntu"]
        template["spec"]["containers"][0]["volumeMounts"] = [
            {"name": rtx.repo_config_map, "mountPath": f"{directory}/{f}", "subPath": f, "readOnly": True}
            for f in files
        ]
    return daemonset


def _stale_template(daemonset: JSON) -> None:
    """The `stale_template` fault (`local-cloud fault driver --kind stale-template`): the operator updates
    the driver DaemonSet's template with an OnDelete update strategy, so the running driver pods stay on
    the older template until someone deletes them (cleared, the template is the current one again)."""
    daemonset["spec"]["updateStrategy"] = {"type": "OnDelete"}
    metadata = daemonset["spec"]["template"]["metadata"]
    metadata["annotations"] = {**(metadata.get("annotations") or {}), STALE_TEMPLATE_ANNOTATION: "pending"}


def _gpu_operator(
    mig: JSON,
    rtx: RtxDriver | None = None,
    repositories: list[str] | None = None,
    driver_faults: frozenset[str] = frozenset(),
) -> list[JSON]:
    """The GPU operator as its chart leaves it: the ClusterPolicy (state ready, the chart's version label,
    each component's version) and the component DaemonSets, whose images carry those versions; MIG
    Manager only with MIG. `mig.versions` (the recipe's pins) override the chart's defaults. With the RTX
    values, the driver follows them (see _rtx_driver_daemonset); while the ConfigMap their repoConfig
    names is missing, the operator cannot render the driver: the ClusterPolicy is `notReady` and the
    driver DaemonSet is left as it was (not created yet on a new cluster)."""
    rtx = rtx or RtxDriver()
    versions = {**OPERATOR_VERSIONS, **{k: v for k, v in (mig.get("versions") or {}).items() if v}}
    blocked = rtx.enabled and bool(rtx.repo_config_map) and repositories is None
    policy: JSON = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {
            "name": "cluster-policy",
            "labels": {MANAGED_BY: "Helm", "app.kubernetes.io/version": versions["operator"]},
        },
        "spec": {
            "driver": {"version": versions["driver"]},
            "devicePlugin": {"version": versions["device_plugin"]},
            "gfd": {"version": versions["gfd"]},
            "migManager": {"version": versions["mig_manager"], "enabled": bool(mig)},
            "toolkit": {"version": versions["toolkit"]},
            "mig": {"strategy": mig.get("strategy") or "single"},
            "cdi": {"enabled": True},
        },
        "status": {"state": "notReady" if blocked else "ready"},
    }
    if rtx.enabled:
        policy["spec"]["driver"]["rdma"] = {"enabled": rtx.rdma}
        if rtx.repo_config_map:
            policy["spec"]["driver"]["repoConfig"] = {"configMapName": rtx.repo_config_map}
        policy["spec"]["toolkit"]["env"] = [{"name": k, "value": v} for k, v in rtx.toolkit_env]
    images = {
        "nvidia-driver-daemonset": f"nvcr.io/nvidia/driver:{versions['driver']}-ubuntu22.04",
        "nvidia-container-toolkit-daemonset": f"nvcr.io/nvidia/k8s/container-toolkit:{versions['toolkit']}",
        "nvidia-device-plugin-daemonset": f"nvcr.io/nvidia/k8s-device-plugin:{versions['device_plugin']}",
        "gpu-feature-discovery": f"nvcr.io/nvidia/k8s-device-plugin:{versions['gfd']}",
    }
    if mig:
        images["nvidia-mig-manager"] = (
            f"nvcr.io/nvidia/cloud-native/k8s-mig-manager:{versions['mig_manager']}"
        )
    daemonsets = [_gpu_daemonset("gpu-operator", app, app, image) for app, image in images.items()]
    driver = next(d for d in daemonsets if d["metadata"]["name"] == "nvidia-driver-daemonset")
    if rtx.enabled:
        for daemonset in daemonsets:
            name = daemonset["metadata"]["name"]
            if name == "nvidia-driver-daemonset":
                _rtx_driver_daemonset(daemonset, rtx, repositories or [], driver_faults)
            elif name == "nvidia-container-toolkit-daemonset" and rtx.toolkit_env:
                container = daemonset["spec"]["template"]["spec"]["containers"][0]
                container["env"] = [{"name": k, "value": v} for k, v in rtx.toolkit_env]
        if blocked:
            daemonsets = [d for d in daemonsets if d is not driver]
    if "stale_template" in driver_faults:
        _stale_template(driver)
    labels = _labels("gpu-operator")
    operator = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gpu-operator", "namespace": "gpu-operator", "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "gpu-operator"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "gpu-operator",
                            "image": f"nvcr.io/nvidia/gpu-operator:{versions['operator']}",
                        }
                    ],
                },
            },
        },
    }
    return [_namespace("gpu-operator"), CLUSTERPOLICY_CRD, policy, operator, *daemonsets]


# --------------------------------------------------------------------------------- kwok Stages


def kwok_stages(stage_dir: Path | None) -> list[JSON]:
    """kwok's own stages (shipped beside the kwok binary by `make tools`) plus the simulator's."""
    stages: list[JSON] = []
    if stage_dir is not None and stage_dir.is_dir():
        for path in sorted(stage_dir.glob("*.yaml")):
            stages += [
                doc for doc in yaml.safe_load_all(path.read_text()) if doc and doc.get("kind") == "Stage"
            ]
    conditions = [
        stage
        for kind, label, reason, message in NEBIUS_CONDITIONS.values()
        for stage in (
            _condition_stage(f"npa-{label.rsplit('/', 1)[1]}", kind, label, "In", "True", reason, message),
            _condition_stage(
                f"npa-{label.rsplit('/', 1)[1]}-cleared", kind, label, "NotIn", "False", "Cleared", "cleared"
            ),
        )
    ]
    return [*stages, _gpu_error_stage(), _gpu_error_cleared_stage(), *conditions]


_CONDITIONS_WITH = """{{ $now := Now }}
{{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $lastTransitionTime | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
"""


def _node_stage(name: str, expressions: list[JSON], template: str) -> JSON:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Node"},
            "selector": {"matchExpressions": expressions},
            "weight": 10000,
            "next": {"statusTemplate": template},
        },
    }


def _gpu_error_stage() -> JSON:
    """A node labelled with the GPU-error fault reports the `NebiusGPUError` condition, as Nebius's node
    health checks do for a failed GPU."""
    return _gpu_error_stage_setting(
        "npa-gpu-error",
        labelled="In",
        status="True",
        reason="GPUFailure",
        message="GPU has fallen off the bus (Xid 79)",
    )


def _gpu_error_cleared_stage() -> JSON:
    """kwok merges a stage's conditions into the node's by type, so clearing writes the condition False
    (as a node whose GPU recovered reports it) instead of leaving it out."""
    # (the label test is NotIn: kwok's `DoesNotExist` does not match a missing map key, read as null)
    return _gpu_error_stage_setting(
        "npa-gpu-error-cleared", labelled="NotIn", status="False", reason="GPUHealthy", message="GPUs healthy"
    )


def _gpu_error_stage_setting(name: str, labelled: str, status: str, reason: str, message: str) -> JSON:
    """A node stage that sets the `NebiusGPUError` condition to `status` on nodes whose GPU-error label is
    `labelled` ("In"/"NotIn" ["true"]) and whose condition is not `status` yet."""
    return _condition_stage(name, GPU_ERROR_CONDITION, GPU_ERROR_LABEL, labelled, status, reason, message)


def _condition_stage(
    name: str, kind: str, label: str, labelled: str, status: str, reason: str, message: str
) -> JSON:
    """A node stage that sets condition `kind` to `status` on nodes whose `label` is `labelled`
    ("In"/"NotIn" ["true"]) and whose condition is not `status` yet."""
    condition = (
        "- lastHeartbeatTime: {{ $now | Quote }}\n"
        "  lastTransitionTime: {{ $now | Quote }}\n"
        f'  message: "{message}"\n'
        f'  reason: "{reason}"\n'
        f'  status: "{status}"\n'
        f'  type: "{kind}"\n'
    )
    return _node_stage(
        name,
        [
            {"key": f'.metadata.labels["{label}"]', "operator": labelled, "values": ["true"]},
            {
                "key": f'.status.conditions.[] | select( .type == "{kind}" ) | .status',
                "operator": "NotIn" if status == "True" else "In",
                "values": ["True"],
            },
        ],
        _CONDITIONS_WITH + condition,
    )


def pod_failure_stage(nodes: list[str]) -> JSON:
    """Pods that run on a node with the pod-failure fault fail (exit 1), as a workload on a broken GPU
    would; kwok's ready/complete stages handle every other pod."""
    expressions: list[JSON] = [
        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
        {"key": ".status.phase", "operator": "In", "values": ["Running"]},
        {"key": ".spec.nodeName", "operator": "In", "values": sorted(nodes) or ["-"]},
        # the node's own daemons (the driver stack) keep running: only workloads fail
        {"key": ".metadata.ownerReferences.[].kind", "operator": "NotIn", "values": ["DaemonSet"]},
        # nvidia-smi reads the driver, it runs no kernel: the agent answers the MIG hardware probe
        {
            "key": '.metadata.labels["npa.nebius.com/smoke"]',
            "operator": "NotIn",
            "values": ["mig-hardware", *AGENT_ANSWERED_FABRIC_PROBES],
        },
    ]
    message = '"CUDA error: an illegal memory access was encountered"'
    return _terminating_stage(POD_FAILURE_STAGE, expressions, 1, message)


SMOKE_STAGE = "npa-gpu-smoke"
# The fabric check's NCCL probes (simulator/kube/fabric.py answers them, pod-failure included).
AGENT_ANSWERED_FABRIC_PROBES = ("nccl-intra", "nccl-inter")


def smoke_stage(faulted_nodes: list[str]) -> JSON:
    """What a CUDA vectorAdd smoke pod (labelled by the GPU health gate) does on a healthy node: exits 0
    and leaves vectorAdd's output as its termination message. On a node with the pod-failure fault the
    pod-failure stage fails it instead, so this stage leaves those nodes out."""
    expressions: list[JSON] = [
        {
            "key": '.metadata.labels["app.kubernetes.io/managed-by"]',
            "operator": "In",
            "values": ["npa-gpu-health"],
        },
        {
            "key": '.metadata.labels["npa.nebius.com/smoke"]',
            "operator": "NotIn",
            # the graphics stages and the agent answer those
            "values": ["graphics", "mig-hardware", *AGENT_ANSWERED_FABRIC_PROBES],
        },
        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
        {"key": ".status.phase", "operator": "In", "values": ["Running"]},
        {"key": ".spec.nodeName", "operator": "NotIn", "values": sorted(faulted_nodes) or ["-"]},
    ]
    message = '"[Vector addition of 50000 elements]\\nTest PASSED\\nDone"'
    return _terminating_stage(SMOKE_STAGE, expressions, 0, message)


def _terminating_stage(name: str, expressions: list[JSON], exit_code: int, message: str) -> JSON:
    status = "Succeeded" if exit_code == 0 else "Failed"
    reason = "Completed" if exit_code == 0 else "Error"
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {"matchExpressions": expressions},
            "weight": 10000,
            "next": {
                "statusTemplate": (
                    "{{ $now := Now }}\n"
                    "containerStatuses:\n"
                    "{{ range $index, $item := .spec.containers }}\n"
                    "- image: {{ $item.image | Quote }}\n"
                    "  name: {{ $item.name | Quote }}\n"
                    "  ready: false\n"
                    "  restartCount: 0\n"
                    "  started: false\n"
                    "  state:\n"
                    "    terminated:\n"
                    f"      exitCode: {exit_code}\n"
                    "      finishedAt: {{ $now | Quote }}\n"
                    f"      message: {message}\n"
                    f"      reason: {reason}\n"
                    "      startedAt: {{ $now | Quote }}\n"
                    "{{ end }}\n"
                    f"phase: {status}\n"
                )
            },
        },
    }


_GRAPHICS_OK = (
    '"NPA_GLX_LOADED\\nNPA_EGL_LOADED\\nVulkan Instance Version: 1.4.303\\n'
    'GPU0:\\n  deviceName = NVIDIA RTX PRO 6000 Blackwell Server Edition"'
)
_GRAPHICS_NONE = '"NPA_GLX_LOADED\\nNPA_EGL_LOADED\\nERROR: vkEnumeratePhysicalDevices: no Vulkan device"'


def graphics_stages(graphics_nodes: list[str], faulted_nodes: list[str]) -> list[JSON]:
    """What a graphics readiness pod (GLX, EGL, Vulkan) prints on each node: an RTX node renders; any other
    GPU node has no Vulkan device (a data-center GPU without display engines). A node with the
    pod-failure fault fails it through the pod-failure stage, so both stages leave those out."""
    base: list[JSON] = [
        {"key": '.metadata.labels["npa.nebius.com/smoke"]', "operator": "In", "values": ["graphics"]},
        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
        {"key": ".status.phase", "operator": "In", "values": ["Running"]},
        {"key": ".spec.nodeName", "operator": "NotIn", "values": sorted(faulted_nodes) or ["-"]},
    ]
    renders: JSON = {"key": ".spec.nodeName", "operator": "In", "values": sorted(graphics_nodes) or ["-"]}
    cannot: JSON = {"key": ".spec.nodeName", "operator": "NotIn", "values": sorted(graphics_nodes) or ["-"]}
    return [
        _terminating_stage("npa-graphics-renders", [*base, renders], 0, _GRAPHICS_OK),
        _terminating_stage("npa-graphics-no-device", [*base, cannot], 1, _GRAPHICS_NONE),
    ]
