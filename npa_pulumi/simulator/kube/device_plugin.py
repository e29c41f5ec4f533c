"""A node's device plugin holding stale resources: the `stale_device_plugin` fault
(`local-cloud fault node --kind stale-device-plugin`).

What it models: the device plugin registers a node's GPUs with the kubelet from what GPU feature discovery
last labelled and what the driver showed when the plugin started. When the GPU layout changes under a
running plugin (MIG Manager rebuilding the geometry, a driver reload), the node keeps advertising what the
plugin registered: the known stale split of a whole GPU in capacity (`nvidia.com/gpu` = the node's GPUs)
with none allocatable. It clears only when GPU feature discovery has been restarted after the fault, and
the device plugin after that (a plugin restarted before discovery re-reads the stale labels).

The fault's value is the time it was injected (the simulator's clock); whether the pods on the node were
(re)created after it is read from the API server, from their creation timestamps, so the model holds no
state of its own and survives an agent restart. The repair it calls for is the health gate's own
(npa_pulumi/kube/gpu_health/repair.py): a rolling restart of GPU feature discovery, then of the plugin.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from npa_pulumi.kube.gpu_health.config import DRIVER_NAMESPACES

JSON = dict[str, Any]
FAULT = "stale_device_plugin"


def _created(pod: JSON) -> float:
    stamp = str(pod["metadata"].get("creationTimestamp") or "")
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _ready(pod: JSON) -> bool:
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    return status.get("phase") == "Running" and bool(containers) and all(c.get("ready") for c in containers)


def _newest(pods: list[JSON], node: str, owner_part: str) -> JSON | None:
    """The newest live pod on `node` of a DaemonSet whose name holds `owner_part`."""
    found = [
        p
        for p in pods
        if (p.get("spec") or {}).get("nodeName") == node
        and not p["metadata"].get("deletionTimestamp")
        and any(owner_part in str(o.get("name", "")) for o in p["metadata"].get("ownerReferences") or [])
    ]
    return max(found, key=_created, default=None)


def still_stale(pods: list[JSON], node: str, injected_at: float, has_discovery: bool) -> bool:
    """Whether the node's plugin still holds the stale resources: it does until discovery (where the driver
    stack has it) was recreated after the fault and the plugin after discovery, both ready. Creation times
    are whole seconds, so a pod of the fault's own second counts as older."""
    after = int(injected_at) + 1

    def fresh(pod: JSON | None) -> bool:
        return pod is not None and _ready(pod) and _created(pod) >= after

    plugin = _newest(pods, node, "device-plugin")
    if plugin is None or not fresh(plugin):
        return True
    if not has_discovery:
        return False
    discovery = _newest(pods, node, "feature-discovery")
    if discovery is None or not fresh(discovery):
        return True
    return _created(plugin) < _created(discovery)  # the plugin restarted before discovery


def with_stale_resources(client: Any, cluster: JSON, nodes: dict[str, JSON]) -> dict[str, JSON]:
    """The desired nodes, those with the fault (and not healed yet) advertising the stale split."""
    faulted = {
        name: float(faults[FAULT])
        for name, faults in (cluster.get("node_faults") or {}).items()
        if faults.get(FAULT) and name in nodes
    }
    if not faulted:
        return nodes
    driver = ((cluster.get("addons") or {}).get("gpu_driver")) or ""
    namespace = DRIVER_NAMESPACES.get(driver)
    pods = client.list(f"/api/v1/namespaces/{namespace}/pods") if namespace else []
    has_discovery = driver == "operator"
    result = dict(nodes)
    for name, injected_at in faulted.items():
        if not still_stale(pods, name, injected_at, has_discovery):
            continue
        node = copy.deepcopy(nodes[name])
        gpus = str(node["metadata"]["labels"].get("nvidia.com/gpu.count") or "0")
        status = node["status"]
        status["capacity"] = {**status["capacity"], "nvidia.com/gpu": gpus}
        status["allocatable"] = {**status["allocatable"], "nvidia.com/gpu": "0"}
        result[name] = node
    return result
