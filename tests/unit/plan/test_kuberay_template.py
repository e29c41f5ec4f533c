"""The fleet's KubeRay template (npa_pulumi/kube/kuberay.py), its policy, its gate's judgement, the plan
that carries it, and the pins it shares with the toolchain."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.engine.backends.mk8s.program import merge_evidence, ray_summary
from npa_pulumi.kube import kuberay
from npa_pulumi.plan import resolve_targets
from npa_pulumi.plan.gates import kuberay_template
from npa_pulumi.policies import catalog
from npa_pulumi.policies.fleet_guardrails_lib.checks import CheckContext, check_kuberay_reviewed_template
from npa_pulumi.policies.fleet_guardrails_lib.facts import ClusterRegistry, Subject
from npa_pulumi.runtime.pins import kuberay_operator_image
from npa_pulumi.spec import constants as c
from npa_pulumi.spec import load_spec

REPO = Path(__file__).resolve().parents[3]
TEMPLATE = kuberay.RayTemplate(
    worker_replicas=2,
    worker_cpus=2,
    worker_memory_gib=4,
    ray_version=c.RAY_VERSION,
    image=c.RAY_IMAGE,
    operator_image=kuberay_operator_image(),
    cpu_node_group="cpu-ray-ng-cpu",
)


def test_the_operator_release_is_pinned_once_for_the_toolchain_and_the_template() -> None:
    pins = tomllib.loads((REPO / "tools" / "pins.toml").read_text())["kuberay"]
    assert pins["image"] == kuberay_operator_image() == f"quay.io/kuberay/operator:v{pins['version']}"
    assert pins["module"] == "github.com/ray-project/kuberay/ray-operator"


def test_raycluster_spec_is_the_reviewed_template() -> None:
    spec = kuberay.raycluster_spec(TEMPLATE)
    assert spec["rayVersion"] == "2.58.0" and spec["enableInTreeAutoscaling"] is False
    (group,) = spec["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 2
    for template in (spec["headGroupSpec"]["template"], group["template"]):
        (container,) = template["spec"]["containers"]  # no sidecars
        assert container["image"] == c.RAY_IMAGE and "@sha256:" in c.RAY_IMAGE
        security = container["securityContext"]
        assert security["runAsNonRoot"] is True and security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert template["spec"]["nodeSelector"] == {kuberay.NODE_GROUP_LABEL: "cpu-ray-ng-cpu"}
    worker = group["template"]["spec"]["containers"][0]["resources"]
    assert worker["requests"] == worker["limits"] == {"cpu": "2", "memory": "4Gi"}


def test_network_policy_admits_only_its_own_namespace() -> None:
    policy = kuberay.network_policy_spec()
    assert policy["podSelector"] == {} and policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [{"from": [{"podSelector": {}}]}]  # no namespaceSelector: this one only


def test_plan_carries_the_template_for_enabled_clusters_only() -> None:
    enabled, disabled = resolve_targets(load_spec(REPO / "examples" / "kuberay.yaml"))
    assert kuberay_template(disabled.cluster) is None
    template = kuberay_template(enabled.cluster)
    assert template is not None
    assert template.worker_replicas == 2
    assert template.cpu_node_group == f"{enabled.cluster.name}-ng-cpu"
    assert template.image == c.RAY_IMAGE
    assert kuberay.RayTemplate(**template.to_inputs()) == template  # stored as its fields


# --------------------------------------------------------------------------------- the policy


def _subject(spec: dict[str, Any], managed: bool = True) -> Subject:
    labels = {"app.kubernetes.io/managed-by": "npa-pulumi"} if managed else {}
    props = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"labels": labels}, "spec": spec}
    return Subject(resource_type=catalog.RAYCLUSTER, props=props, name="ray")


def _check(spec: dict[str, Any], managed: bool = True) -> list[str]:
    ctx = CheckContext(registry=ClusterRegistry(), secrets_visible=True)
    return check_kuberay_reviewed_template(_subject(spec, managed), {}, ctx)


def test_policy_passes_the_template() -> None:
    assert _check(kuberay.raycluster_spec(TEMPLATE)) == []


def _mutated(path: list[Any], value: Any) -> dict[str, Any]:
    spec = copy.deepcopy(kuberay.raycluster_spec(TEMPLATE))
    node: Any = spec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return spec


WORKER = ["workerGroupSpecs", 0, "template", "spec"]


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        (["enableInTreeAutoscaling"], True, "enableInTreeAutoscaling"),
        (["rayVersion"], "2.9.0", "rayVersion"),
        ([*WORKER, "containers", 0, "image"], "rayproject/ray:latest", "digest-pinned"),
        ([*WORKER, "containers", 0, "securityContext", "runAsNonRoot"], False, "runAsNonRoot"),
        ([*WORKER, "containers", 0, "securityContext", "allowPrivilegeEscalation"], True, "Escalation"),
        ([*WORKER, "containers", 0, "securityContext", "capabilities"], {"add": ["SYS_ADMIN"]}, "drop"),
        ([*WORKER, "nodeSelector"], {}, "node selector"),
        (["workerGroupSpecs", 0, "maxReplicas"], 5, "fixed-size"),
    ],
)
def test_policy_flags_each_departure(path: list[Any], value: Any, fragment: str) -> None:
    problems = _check(_mutated(path, value))
    assert any(fragment in p for p in problems), problems


def test_policy_flags_sidecars_and_extra_groups_but_not_users_own_clusters() -> None:
    spec = kuberay.raycluster_spec(TEMPLATE)
    sidecar = copy.deepcopy(spec)
    sidecar["headGroupSpec"]["template"]["spec"]["containers"].append({"name": "metrics", "image": "x"})
    assert any("sidecars" in p for p in _check(sidecar))
    extra = copy.deepcopy(spec)
    extra["workerGroupSpecs"].append(copy.deepcopy(extra["workerGroupSpecs"][0]))
    assert any("worker groups" in p for p in _check(extra))
    assert _check(_mutated(["enableInTreeAutoscaling"], True), managed=False) == []


# --------------------------------------------------------------------------------- the gate


class FakeClient:
    def __init__(self, raycluster: dict[str, Any] | None, pods: list[dict[str, Any]], nodes: dict[str, str]):
        self.raycluster, self.pods, self.nodes = raycluster, pods, nodes

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        assert path == kuberay.raycluster_path()
        return self.raycluster

    def list(self, path: str, selector: str = "") -> list[dict[str, Any]]:
        if path == "/api/v1/nodes":
            return [
                {"metadata": {"name": n, "labels": {kuberay.NODE_GROUP_LABEL: g}}}
                for n, g in self.nodes.items()
            ]
        assert selector == f"{kuberay.RAY_CLUSTER_LABEL}={kuberay.RAYCLUSTER_NAME}"
        return self.pods


def _pod(
    name: str, role: str, node: str = "n1", image: str = c.RAY_IMAGE, ready: bool = True
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {kuberay.RAY_NODE_TYPE_LABEL: role}},
        "spec": {"nodeName": node, "containers": [{"image": image}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]},
    }


def _raycluster(provisioned: str = "True", head: str = "True", ready_workers: int = 2) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {"type": "RayClusterProvisioned", "status": provisioned},
                {"type": "HeadPodReady", "status": head},
            ],
            "readyWorkerReplicas": ready_workers,
            "desiredWorkerReplicas": 2,
            "state": "ready",
        }
    }


CONFIG = kuberay.RayGateConfig(worker_replicas=2, image=c.RAY_IMAGE, cpu_node_group="cpu", timeout_s=0)
PODS = [_pod("head", "head"), _pod("w1", "worker"), _pod("w2", "worker")]


def test_gate_passes_a_ready_ray_cluster_on_the_cpu_group() -> None:
    snap = kuberay.check_ray(FakeClient(_raycluster(), PODS, {"n1": "cpu"}), CONFIG)
    assert snap.ready and snap.head_ready and snap.ready_workers == 2 and len(snap.pods) == 3


@pytest.mark.parametrize(
    ("client", "fragment"),
    [
        (FakeClient(None, [], {}), "does not exist"),
        (FakeClient(_raycluster(provisioned="False"), PODS, {"n1": "cpu"}), "RayClusterProvisioned is False"),
        (FakeClient(_raycluster(head="False"), PODS, {"n1": "cpu"}), "HeadPodReady is False"),
        (FakeClient(_raycluster(ready_workers=1), PODS, {"n1": "cpu"}), "readyWorkerReplicas is 1"),
        (FakeClient(_raycluster(), PODS, {"n1": "gpu"}), "not on the CPU node group"),
        (
            FakeClient(_raycluster(), [*PODS, _pod("w3", "worker", image="ray:latest")], {"n1": "cpu"}),
            "pinned",
        ),
    ],
)
def test_gate_says_what_is_missing(client: FakeClient, fragment: str) -> None:
    evidence = kuberay.wait_for_ray(lambda _t: client, CONFIG, sleep=lambda _s: None)
    assert evidence["passed"] is False
    assert any(fragment in m for m in evidence["missing"]), evidence["missing"]


def test_gate_waits_until_ready_within_its_timeout() -> None:
    looks = iter([_raycluster(provisioned="False", ready_workers=0), _raycluster()])
    now = [0.0]

    class Waking(FakeClient):
        def get_or_none(self, path: str) -> dict[str, Any] | None:
            return next(looks)

    config = kuberay.RayGateConfig(worker_replicas=2, image=c.RAY_IMAGE, cpu_node_group="cpu", timeout_s=60)
    evidence = kuberay.wait_for_ray(
        lambda _t: Waking(None, PODS, {"n1": "cpu"}),
        config,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    assert evidence["passed"] is True and evidence["attempts"] == 2


def test_evidence_merges_under_the_health_gates_and_status_summary() -> None:
    ray = {"passed": False, "reason": "the Ray cluster is not ready: x", "ready_workers": 1, "missing": ["x"]}
    merged = merge_evidence({"passed": True, "nodes": 3}, ray)
    assert (
        merged["passed"] is False and merged["reason"].startswith("the Ray cluster") and merged["nodes"] == 3
    )
    assert merge_evidence({"passed": False, "reason": "node"}, ray)["reason"] == "node"
    assert ray_summary(ray)["ready_workers"] == 1 and ray_summary(ray)["ready"] is False


@pytest.mark.parametrize("field", ["gpu_workers", "image", "ray_service", "enable_autoscaling"])
def test_gpu_workers_services_images_and_autoscaling_cannot_be_asked_for(field: str) -> None:
    import json

    from npa_pulumi.spec import SpecError, parse_spec

    cluster = {"cpu_nodes": {"count": 1, "preset": "16vcpu-64gb"}, "kuberay": {"enabled": True, field: 1}}
    with pytest.raises(SpecError) as caught:
        parse_spec(json.dumps({"name": "f", "projects": [{"name": "a", "clusters": [cluster]}]}))
    [problem] = caught.value.problems
    assert problem.path == f"projects[0].clusters[0].kuberay.{field}"
