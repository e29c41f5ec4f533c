"""The managed cluster's own system workloads in `kube-system`, as an mk8s cluster has them from its
creation: cilium-operator, CoreDNS, the CoreDNS autoscaler and metrics-server, each a Deployment under a
PodDisruptionBudget. They run on the CPU nodes (they tolerate no GPU taint), so on a cluster with one CPU
node a drain cannot reschedule them anywhere: what a teardown must get past (engine/teardown/drain.py).

The agent installs them once, at the cluster's first start (`install_once`), the way an addon manager in
"EnsureExists" mode does, and never re-applies them: a budget a teardown removed stays removed until
someone puts it back, so a test can tell a restore from a re-sync. The real scheduler places the pods,
the real controller manager's disruption controller computes each budget's `disruptionsAllowed`, and the
API server refuses an eviction that would break one (429), as on a real cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

JSON = dict[str, Any]

NAMESPACE = "kube-system"
MARKER = "system-workloads"  # in the cluster's home: installed once, never again
FIELD_MANAGER = "nebius-mk8s-addons"
SYSTEM_DEPLOYMENTS = ("cilium-operator", "coredns", "coredns-autoscaler", "metrics-server")
_CRITICAL = [{"key": "CriticalAddonsOnly", "operator": "Exists"}]


def _deployment(name: str, labels: dict[str, str], replicas: int, image: str, spread: bool = False) -> JSON:
    spec: JSON = {
        "priorityClassName": "system-cluster-critical",
        "automountServiceAccountToken": False,
        "tolerations": _CRITICAL,
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "containers": [
            {
                "name": name,
                "image": image,
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
            }
        ],
    }
    if spread:  # one replica per node, as cilium-operator's chart requires
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(labels)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": spec},
        },
    }


def _budget(name: str, labels: dict[str, str], **limit: int) -> JSON:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"addonmanager.kubernetes.io/mode": "EnsureExists"},
        },
        "spec": {"selector": {"matchLabels": dict(labels)}, **limit},
    }


def workloads() -> list[JSON]:
    """The four Deployments and their budgets, in apply order."""
    cilium = {"io.cilium/app": "operator", "name": "cilium-operator"}
    dns = {"k8s-app": "kube-dns"}
    autoscaler = {"k8s-app": "coredns-autoscaler"}
    metrics = {"k8s-app": "metrics-server"}
    return [
        _deployment("cilium-operator", cilium, 2, "quay.io/cilium/operator-generic:v1.16.5", spread=True),
        _budget("cilium-operator", cilium, maxUnavailable=1),
        _deployment("coredns", dns, 2, "registry.k8s.io/coredns/coredns:v1.11.3"),
        _budget("coredns", dns, minAvailable=1),
        _deployment(
            "coredns-autoscaler", autoscaler, 1, "registry.k8s.io/cpa/cluster-proportional-autoscaler:v1.9.0"
        ),
        _budget("coredns-autoscaler", autoscaler, minAvailable=1),
        _deployment("metrics-server", metrics, 1, "registry.k8s.io/metrics-server/metrics-server:v0.7.2"),
        _budget("metrics-server", metrics, minAvailable=1),
    ]


def install_once(client: Any, home: Path, log: Callable[[str], None]) -> None:
    """Apply the system workloads unless this cluster already had them (its marker); an API error leaves
    no marker, so the next start tries again."""
    from npa_pulumi.kube.client import object_path

    marker = home / MARKER
    if marker.exists():
        return
    for obj in workloads():
        client.apply(object_path(obj), obj, FIELD_MANAGER)
    marker.write_text("installed\n")
    log("system workloads installed in kube-system: " + ", ".join(SYSTEM_DEPLOYMENTS))
