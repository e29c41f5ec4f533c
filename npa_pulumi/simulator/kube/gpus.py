"""The GPUs inside a local cluster's nodes, as their driver reports them: what `nvidia-smi` prints.

No kubelet or driver runs in a local cluster, so the cluster's agent answers the GPU health gate's MIG
hardware probe (pods labelled `npa.nebius.com/smoke=mig-hardware`, see npa_pulumi/kube/gpu_health/)
from its model of the node: the preset's GPUs (one fewer under the `gpu_missing` fault), each with a
stable UUID, the GPU operator's driver release (the recipe's pin), MIG mode enabled on MIG clusters with the
all-balanced layout's devices, and under the `mig_disabled` fault a first GPU whose MIG mode was reset
(current Disabled, pending Enabled, no MIG devices) while the node object still advertises the layout, as a
device plugin that has not restarted would. The probe's output becomes its termination message, as the real
probe's `tee /dev/termination-log` leaves it.
"""

from __future__ import annotations

import uuid
from typing import Any

from npa_pulumi.simulator.kube import kubelet, shapes

JSON = dict[str, Any]
PROBE_SELECTOR = "npa.nebius.com/smoke=mig-hardware"
MARKER = "NPA_MIG_DEVICES"  # between the --query-gpu rows and the -L listing (the probe's script)
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
    "latest NVIDIA driver is installed and running.\n"
)
_UUIDS = uuid.UUID("5b0d3f5e-4c7a-4f0e-9a57-6e7d2b1c9f01")


def _gpu_uuid(node: str, index: int) -> str:
    return f"GPU-{uuid.uuid5(_UUIDS, f'{node}/gpu/{index}')}"


def _mig_uuid(node: str, index: int, device: int) -> str:
    return f"MIG-{uuid.uuid5(_UUIDS, f'{node}/gpu/{index}/mig/{device}')}"


def mig_profiles_per_gpu() -> list[str]:
    """The all-balanced layout's MIG devices on one GPU, largest first (as `nvidia-smi -L` lists them)."""
    profiles = [
        resource[len("nvidia.com/mig-") :]
        for resource, count in shapes.MIG_RESOURCES_PER_GPU.items()
        if resource.startswith("nvidia.com/mig-")
        for _ in range(count)
    ]
    return sorted(profiles, key=lambda p: (-int(p.split("g", 1)[0]), p))


def nvidia_smi(cluster: JSON, group: JSON, node: str) -> str:
    """`nvidia-smi --query-gpu=index,uuid,driver_version,mig.mode.current,mig.mode.pending`, the marker,
    then `nvidia-smi -L`, on `node` of `group`."""
    faults = (cluster.get("node_faults") or {}).get(node) or {}
    addons = cluster.get("addons") or {}
    mig = addons.get("mig") or {}
    versions = {**shapes.OPERATOR_VERSIONS, **{k: v for k, v in (mig.get("versions") or {}).items() if v}}
    gpus = shapes.preset_shape(group.get("preset") or "")[0]
    present = gpus - 1 if faults.get("gpu_missing") else gpus
    product = shapes.gpu_product(group["platform"]).replace("-", " ")
    rows, listing = [], []
    for index in range(present):
        enabled = bool(mig) and not (faults.get("mig_disabled") and index == 0)
        current = "Enabled" if enabled else "Disabled"
        pending = "Enabled" if mig else "Disabled"
        rows.append(f"{index}, {_gpu_uuid(node, index)}, {versions['driver']}, {current}, {pending}")
        listing.append(f"GPU {index}: {product} (UUID: {_gpu_uuid(node, index)})")
        if enabled:
            for device, profile in enumerate(mig_profiles_per_gpu()):
                listing.append(
                    f"  MIG {profile:<12} Device {device:>2}: (UUID: {_mig_uuid(node, index, device)})"
                )
    return "\n".join([*rows, MARKER, *listing]) + "\n"


class GpuModel:
    """The node's driver, for the MIG hardware probe (the CUDA and graphics smokes are kwok Stages)."""

    def answer_probes(self, client: Any, cluster: JSON, groups: list[JSON]) -> None:
        group_of = {
            name: group
            for group in groups
            if group.get("state") == "RUNNING"
            for name in shapes.current_node_names(cluster, group)  # a replaced node's newcomer too
        }
        for pod in kubelet.running_probes(client, PROBE_SELECTOR):
            node = (pod.get("spec") or {}).get("nodeName", "")
            group = group_of.get(node)
            container = (pod.get("spec") or {}).get("containers", [{}])[0]
            if group is None or not shapes.preset_shape(group.get("preset") or "")[0]:
                kubelet.finish(client, pod, container, 9, NO_DRIVER)
                continue
            kubelet.finish(client, pod, container, 0, nvidia_smi(cluster, group, node))
