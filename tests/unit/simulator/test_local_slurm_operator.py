"""The local cloud's simulated soperator: the objects Flux would leave, NodeSet and SlurmCluster status as
the operator sets them from node readiness, the role faults; and the gate's reading of that status."""

from __future__ import annotations

from typing import Any

from npa_pulumi.kube.slurm_check import SlurmGateConfig, problems
from npa_pulumi.simulator.kube import slurm

SLURM: dict[str, Any] = {
    "name": "soperator",
    "namespace": "soperator",
    "controllers": 1,
    "login": 1,
    "accounting": False,
    "nodesets": [{"name": "cpu", "size": 2}],
}


def _node(name: str, role: str, ready: bool = True, nodeset: str = "") -> dict[str, Any]:
    labels = {slurm.ROLE_LABEL: role, **({slurm.NODESET_LABEL: nodeset} if nodeset else {})}
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {"metadata": {"name": name, "labels": labels}, "status": {"conditions": [condition]}}


def _nodes(controller_ready: bool = True) -> list[dict[str, Any]]:
    return [
        *(_node(f"s{i}", "system") for i in range(3)),
        _node("c0", "controller", ready=controller_ready),
        _node("l0", "login"),
        _node("w0", "worker", nodeset="cpu"),
        _node("w1", "worker", nodeset="cpu"),
    ]


def test_flux_leaves_the_crds_the_cluster_its_nodesets_and_services() -> None:
    objects = slurm.desired_objects(SLURM)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert kinds == [
        ("Namespace", "soperator"),
        ("CustomResourceDefinition", "slurmclusters.slurm.nebius.ai"),
        ("CustomResourceDefinition", "nodesets.slurm.nebius.ai"),
        ("SlurmCluster", "soperator"),
        ("NodeSet", "cpu"),
        ("Service", "soperator-login-svc"),
        ("Service", "soperator-controller-svc"),
    ]
    crds = {o["metadata"]["name"]: o for o in objects if o["kind"] == "CustomResourceDefinition"}
    cluster_version = crds["slurmclusters.slurm.nebius.ai"]["spec"]["versions"][0]
    assert cluster_version["name"] == "v1" and cluster_version["subresources"]["status"] == {}
    nodeset_version = crds["nodesets.slurm.nebius.ai"]["spec"]["versions"][0]
    assert nodeset_version["name"] == "v1alpha1" and "scale" in nodeset_version["subresources"]


def test_the_cluster_is_available_when_every_role_is_ready() -> None:
    nodeset = slurm.nodeset_status({"name": "cpu", "size": 2}, _nodes(), [])
    assert (nodeset["phase"], nodeset["replicas"], nodeset["readyReplicas"]) == ("Ready", 2, 2)
    status = slurm.cluster_status(SLURM, _nodes(), {"cpu": {}}, [])
    assert status["phase"] == "Available"
    assert all(c["status"] == "True" for c in status["conditions"])


def test_a_controller_down_makes_it_not_available_naming_the_condition() -> None:
    status = slurm.cluster_status(SLURM, _nodes(controller_ready=False), {"cpu": {}}, [])
    assert status["phase"] == "Not available"
    failing = [c["type"] for c in status["conditions"] if c["status"] != "True"]
    assert failing == ["ControllersAvailable"]
    native = {"phase": status["phase"], "conditions": status["conditions"], "nodesets": {}}
    config = SlurmGateConfig(name="soperator", namespace="soperator", nodesets={"cpu": 2}, timeout_s=1.0)
    found = problems(native, config)
    assert found[0] == "SlurmCluster phase 'Not available' (not True: ControllersAvailable)"
    assert found[1] == "NodeSet cpu: missing"


def test_a_partly_ready_nodeset_is_provisioning_and_fails_the_gate() -> None:
    nodes = [*_nodes()[:-1], _node("w1", "worker", ready=False, nodeset="cpu")]
    status = slurm.nodeset_status({"name": "cpu", "size": 2}, nodes, [])
    assert (status["phase"], status["readyReplicas"]) == ("Provisioning", 1)
    native = {
        "phase": "Available",
        "conditions": slurm.cluster_status(SLURM, _nodes(), {"cpu": {}}, [])["conditions"],
        "nodesets": {"cpu": {"phase": "Provisioning", "desired": 2, "replicas": 2, "ready": 1}},
    }
    config = SlurmGateConfig(name="soperator", namespace="soperator", nodesets={"cpu": 2}, timeout_s=1.0)
    assert problems(native, config) == ["NodeSet cpu: phase 'Provisioning', replicas 2/2"]


def test_a_role_fault_takes_that_roles_nodes_down() -> None:
    nodes = {
        n: {"metadata": {"name": n, "labels": {slurm.ROLE_LABEL: r}}}
        for n, r in [("c0", "controller"), ("l0", "login")]
    }
    cluster = {"slurm_faults": {"controller_down": True}}
    labels = {n: o["metadata"]["labels"] for n, o in slurm.with_faults(cluster, nodes).items()}
    assert labels["c0"].get(slurm.NOT_READY_LABEL) == "true"
    assert slurm.NOT_READY_LABEL not in labels["l0"]


def test_the_recipe_records_the_slurm_cluster_as_json_text() -> None:
    assert slurm.slurm_of({"addons": {"soperator": '{"name": "soperator", "nodesets": []}'}}) == {
        "name": "soperator",
        "nodesets": [],
    }
    assert slurm.slurm_of({"addons": {"gpu_driver": ""}}) is None


def test_a_role_fault_counts_before_kwok_marks_the_node() -> None:
    status = slurm.cluster_status(SLURM, _nodes(), {"cpu": {}}, [], down=frozenset({"login"}))
    assert status["phase"] == "Not available" and status["readyLogin"] == 0
    assert [c["type"] for c in status["conditions"] if c["status"] != "True"] == ["LoginAvailable"]


def test_available_counts_only_with_controller_login_and_configuration_true() -> None:
    # soperator's own acceptance: the phase alone is not enough. The simulated operator never reports
    # Available with one of them False, so the status is edited here as a buggy or racing operator's.
    status = slurm.cluster_status(SLURM, _nodes(), {"cpu": {}}, [])
    nodesets = {"cpu": {"phase": "Ready", "replicas": 2, "desired": 2, "ready": 2}}
    config = SlurmGateConfig(name="soperator", namespace="soperator", nodesets={"cpu": 2}, timeout_s=1.0)
    native = {"phase": "Available", "conditions": status["conditions"], "nodesets": nodesets}
    assert problems(native, config) == []
    login_down = [
        {**c, "status": "False", "message": "0/1 login nodes ready"} if c["type"] == "LoginAvailable" else c
        for c in status["conditions"]
    ]
    assert problems({**native, "conditions": login_down}, config) == [
        "SlurmCluster is Available but LoginAvailable is False: 0/1 login nodes ready"
    ]
    without_sconfig = [c for c in status["conditions"] if c["type"] != "SConfigControllerAvailable"]
    assert problems({**native, "conditions": without_sconfig}, config) == [
        "SlurmCluster is Available but reports no SConfigControllerAvailable condition"
    ]


def _drain(node: dict[str, Any], reason: str, status: str = "True") -> dict[str, Any]:
    condition = {"type": slurm.DRAIN_CONDITION, "status": status, "reason": reason, "message": "npa x"}
    node["status"]["conditions"].append(condition)
    return node


def test_a_drain_asked_on_the_node_stays_draining_while_jobs_run_and_is_drained_once_none_does() -> None:
    nodes = [
        _drain(_node("w0", "worker", nodeset="cpu"), slurm.NEED_DRAIN),
        _drain(_node("w1", "worker", nodeset="cpu"), slurm.NEED_DRAIN),
        _drain(_node("w2", "worker", nodeset="cpu"), slurm.DRAINED, status="False"),  # released
        _node("w3", "worker", nodeset="cpu"),  # never asked
    ]
    updates = slurm.drain_updates(nodes, slurm.jobs_of({"slurm_jobs": {"w0": 2, "w3": 1}}))
    assert {name: c["reason"] for name, c in updates.items()} == {"w0": slurm.DRAINING, "w1": slurm.DRAINED}
    assert updates["w0"]["message"] == "npa x"  # the reason Slurm was given stays
    # the job ends: the drain completes
    nodes[0] = _drain(_node("w0", "worker", nodeset="cpu"), slurm.DRAINING)
    assert slurm.drain_updates(nodes[:1], {})["w0"]["reason"] == slurm.DRAINED
    assert slurm.drain_progress("NodeRebooting", 0) == "NodeRebooting"  # soperator's other reasons
