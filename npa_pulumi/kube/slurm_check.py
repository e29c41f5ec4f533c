"""The Slurm half of a soperator cluster's gate, and its native status.

`wait_for_slurm` waits, within the timeout, for what the soperator recipe itself waits for and a little
more: the SlurmCluster (`slurm.nebius.ai/v1`, `soperator` in namespace `soperator`) in phase `Available`,
every NodeSet of the spec (`v1alpha1`) in phase `Ready` with `status.replicas` equal to the node set's
size. `Available` counts only with the controller, login and configuration conditions `True`
(`ACCEPTED_CONDITIONS`, as soperator's own acceptance requires): a phase the operator set while one of them
is `False` or absent is reported by that condition's name. A cluster that never gets there fails with what
was last seen: the phase and the conditions that are not `True`, per NodeSet its phase and replicas.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from npa_pulumi.kube.client import KubeClient, KubeError

JSON = dict[str, Any]
GROUP = "slurm.nebius.ai"
LOGIN_SERVICE = "soperator-login-svc"
# What must be True beside the `Available` phase: the controllers, the login nodes, the configuration
# controller (soperator's SlurmCluster conditions).
ACCEPTED_CONDITIONS = ("ControllersAvailable", "LoginAvailable", "SConfigControllerAvailable")


@dataclass(frozen=True)
class SlurmGateConfig:
    name: str
    namespace: str
    nodesets: dict[str, int]  # worker set -> size
    timeout_s: float
    accounting: bool = False
    poll_s: float = 2.0

    def to_inputs(self) -> JSON:
        """The settings as the Slurm gate's stored input (plain JSON in stack state): what a plan sets; the
        poll interval only when it is not the default (stack state has always held exactly these)."""
        stored = {k: v for k, v in asdict(self).items() if k != "poll_s"}
        return {**stored, **({"poll_s": self.poll_s} if self.poll_s != 2.0 else {})}

    @classmethod
    def from_inputs(cls, stored: JSON) -> SlurmGateConfig:
        """The settings back from the stored input (as `to_inputs` wrote them)."""
        return cls(**stored)


@dataclass
class SlurmCheck:
    passed: bool
    reason: str
    elapsed_s: float
    status: JSON = field(default_factory=dict)  # native_status()'s shape
    failing_conditions: list[JSON] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> JSON:
        return asdict(self)


def _cluster_path(config: SlurmGateConfig) -> str:
    return f"/apis/{GROUP}/v1/namespaces/{config.namespace}/slurmclusters/{config.name}"


def native_status(client: KubeClient, name: str = "soperator", namespace: str = "soperator") -> JSON:
    """The Slurm cluster as its operator reports it: phase, conditions, node sets (ready/desired, phase)
    and the login endpoint (the login Service's LoadBalancer address). `phase` "" when there is none."""
    cluster = client.get_or_none(f"/apis/{GROUP}/v1/namespaces/{namespace}/slurmclusters/{name}") or {}
    status = cluster.get("status") or {}
    sets: dict[str, JSON] = {}
    try:
        items = client.list(f"/apis/{GROUP}/v1alpha1/namespaces/{namespace}/nodesets")
    except KubeError as err:
        if err.status != 404:
            raise
        items = []
    for item in items:
        item_status = item.get("status") or {}
        sets[item["metadata"]["name"]] = {
            "phase": item_status.get("phase", ""),
            "desired": int((item.get("spec") or {}).get("replicas") or 0),
            "replicas": int(item_status.get("replicas") or 0),
            "ready": int(item_status.get("readyReplicas") or 0),
        }
    service = client.get_or_none(f"/api/v1/namespaces/{namespace}/services/{LOGIN_SERVICE}") or {}
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    login = next((i.get("ip") or i.get("hostname") for i in ingress if i.get("ip") or i.get("hostname")), "")
    return {
        "name": name,
        "namespace": namespace,
        "phase": status.get("phase", "") if cluster else "",
        "conditions": [
            {k: c.get(k, "") for k in ("type", "status", "reason", "message")}
            for c in status.get("conditions") or []
        ],
        "nodesets": sets,
        "login_endpoint": login,
    }


def problems(status: JSON, config: SlurmGateConfig) -> list[str]:
    """Why the Slurm cluster is not usable yet ([] when it is)."""
    found: list[str] = []
    if not status.get("phase"):
        found.append(f"no SlurmCluster {config.namespace}/{config.name}")
    elif status["phase"] != "Available":
        failing = [c["type"] for c in status.get("conditions") or [] if c.get("status") != "True"]
        found.append(
            f"SlurmCluster phase {status['phase']!r}"
            + (f" (not True: {', '.join(failing)})" if failing else "")
        )
    else:
        found += _unaccepted(status)
    sets = status.get("nodesets") or {}
    for name, size in config.nodesets.items():
        got = sets.get(name)
        if got is None:
            found.append(f"NodeSet {name}: missing")
        elif got["phase"] != "Ready" or got["replicas"] != size:
            found.append(
                f"NodeSet {name}: phase {got['phase'] or 'none'!r}, replicas {got['replicas']}/{size}"
            )
    return found


def _unaccepted(status: JSON) -> list[str]:
    """An `Available` SlurmCluster whose controller, login or configuration condition is not True."""
    by_type = {c.get("type"): c for c in status.get("conditions") or []}
    found = []
    for kind in ACCEPTED_CONDITIONS:
        condition = by_type.get(kind)
        if condition is None:
            found.append(f"SlurmCluster is Available but reports no {kind} condition")
        elif condition.get("status") != "True":
            detail = condition.get("message") or condition.get("reason") or ""
            found.append(
                f"SlurmCluster is Available but {kind} is {condition.get('status') or 'unset'}"
                + (f": {detail}" if detail else "")
            )
    return found


def wait_for_slurm(
    client_for: Callable[[float], KubeClient],
    config: SlurmGateConfig,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> SlurmCheck:
    started = clock()
    deadline = started + config.timeout_s
    status: JSON = {}
    errors: list[str] = ["not checked yet"]
    while True:
        try:
            status = native_status(
                client_for(min(10.0, max(1.0, deadline - clock()))), config.name, config.namespace
            )
            errors = problems(status, config)
        except KubeError as err:
            errors = [f"the cluster's API: {err}"]
        elapsed = round(clock() - started, 2)
        if not errors:
            return SlurmCheck(
                True, "the Slurm cluster is Available and every NodeSet is Ready", elapsed, status
            )
        if clock() >= deadline:
            failing = [c for c in status.get("conditions") or [] if c.get("status") != "True"]
            return SlurmCheck(
                False,
                f"the Slurm cluster was not usable within {config.timeout_s:g}s: {'; '.join(errors)}",
                elapsed,
                status,
                failing,
                errors,
            )
        sleep(config.poll_s)
