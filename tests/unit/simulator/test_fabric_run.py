"""The fabric check's run (npa_pulumi/kube/fabric_check.py) against an in-memory API whose pods the local
cloud's fabric model answers (npa_pulumi/simulator/kube/fabric.py): thresholds, the culprit search
(each node alone, then halving), cleanup by UID, refusal while GPUs are in use. The same run against real
API servers: tests/integration/test_fabric_gate.py."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from npa_pulumi.kube.client import KubeError
from npa_pulumi.kube.fabric_check import FabricConfig, run_fabric_check
from npa_pulumi.simulator.kube import shapes
from npa_pulumi.simulator.kube.fabric import FabricModel

JSON = dict[str, Any]


class MemoryApi:
    """Just enough of an API server: nodes, pods (Running once created; the model ends them), services,
    deletes with UID preconditions; every read lets the fabric model act, as the agent does each tick."""

    def __init__(self, nodes: int, faults: dict[str, JSON] | None = None, fabric: bool = True) -> None:
        self.group = {
            "id": "mk8snodegroup-e00fabricrun0001",
            "name": "gpu",
            "state": "RUNNING",
            "target_node_count": nodes,
            "platform": "gpu-h200-sxm",
            "preset": "8gpu-128vcpu-1600gb",
            "gpu_cluster_id": "computegpucluster-e00run" if fabric else "",
        }
        self.cluster = {"id": "mk8scluster-e00run", "node_faults": faults or {}}
        self.nodes = list(shapes.desired_nodes(self.cluster, [self.group]).values())
        self.objects: dict[str, JSON] = {}
        self.uids = itertools.count(1)
        self.model = FabricModel()
        self.created: list[str] = []

    def names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]

    def _tick(self) -> None:
        self.model.answer_probes(self, self.cluster, [self.group])

    def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> JSON:
        if method == "POST":
            obj: JSON = copy.deepcopy(body)
            obj["metadata"]["uid"] = f"uid-{next(self.uids)}"
            if obj["kind"] == "Pod":
                obj["status"] = {"phase": "Running"}
            key = f"{path}/{obj['metadata']['name']}"
            self.objects[key] = obj
            self.created.append(key)
            return obj
        if method == "PATCH" and path.endswith("/status"):
            self.objects[path.removesuffix("/status")]["status"] = body["status"]
            return {}
        if method == "DELETE":
            found = self.objects.get(path)
            if found is None:
                raise KubeError("gone", 404)
            if found["metadata"]["uid"] != body["preconditions"]["uid"]:
                raise KubeError("conflict", 409)
            del self.objects[path]
            return {}
        raise AssertionError(f"unexpected {method} {path}")

    def get(self, path: str) -> JSON:
        self._tick()
        if path in self.objects:
            return copy.deepcopy(self.objects[path])
        raise KubeError("not found", 404)

    def get_or_none(self, path: str) -> JSON | None:
        try:
            return self.get(path)
        except KubeError:
            return None

    def list(self, path: str, selector: str = "") -> list[JSON]:
        if path == "/api/v1/nodes":
            return copy.deepcopy(self.nodes)
        key, _, value = selector.partition("=")
        pods = [o for k, o in self.objects.items() if "/pods/" in k]
        return [copy.deepcopy(p) for p in pods if not key or p["metadata"]["labels"].get(key) == value]


def _config(nodes: int, **overrides: Any) -> FabricConfig:
    settings: dict[str, Any] = {
        "gpus_per_node": 8,
        "expected_gpu_nodes": nodes,
        "intra_node": True,
        "inter_node": True,
        "intra_min_busbw_gbps": 420.0,
        "inter_min_busbw_gbps": 360.0,
        "timeout_s": 30.0,
        "poll_s": 0.0,
    }
    return FabricConfig(**{**settings, **overrides})


def _run(api: MemoryApi, config: FabricConfig, **kwargs: Any) -> JSON:
    evidence = run_fabric_check(lambda _t: api, config, **kwargs)  # type: ignore[arg-type,return-value]
    assert not [k for k in api.objects if "/pods/" in k or "/services/" in k], "probes left behind"
    return evidence


def test_a_healthy_fabric_passes_with_every_figure_recorded() -> None:
    api = MemoryApi(2)
    evidence = _run(api, _config(2))
    assert evidence["status"] == "passed", evidence
    assert sorted(evidence["nodes"]) == api.names()
    assert all(r["busbw_gbps"] >= 420 and r["cleaned_up"] for r in evidence["nodes"].values())
    inter = evidence["inter_node"]
    assert inter["status"] == "passed" and inter["busbw_gbps"] >= 360 and inter["result"]["ranks"] == 16
    assert sum("/services/" in k for k in api.created) == 1  # one rendezvous Service, removed after


def test_a_degraded_nvlink_fails_only_its_node_and_skips_the_inter_node_run() -> None:
    api = MemoryApi(2)
    slow = api.names()[1]
    api.cluster["node_faults"] = {slow: {"nvlink_degraded": True}}
    evidence = _run(api, _config(2))
    assert evidence["status"] == "failed" and evidence["slow_nodes"] == [slow]
    assert slow in evidence["reason"] and api.names()[0] not in evidence["reason"]
    assert evidence["inter_node"]["status"] == "not-run"  # not on a node known to be slow


def test_an_infiniband_port_down_is_found_by_running_each_node_alone() -> None:
    api = MemoryApi(2)
    bad = api.names()[0]
    api.cluster["node_faults"] = {bad: {"ib_port_down": True}}
    evidence = _run(api, _config(2))
    inter = evidence["inter_node"]
    assert inter["status"] == "failed" and inter["culprits"] == [bad] and evidence["slow_nodes"] == [bad]
    assert [s["step"] for s in inter["search"]] == ["loopback", "loopback"]


def test_a_slow_link_between_healthy_nodes_is_found_by_halving() -> None:
    """Each of four nodes is fine alone, but all-reduces across two of them are slow: halving names the
    pair (the model's loopback run goes through the node's own ports only)."""
    api = MemoryApi(4)
    names = api.names()
    original = api.model._inter

    def slow_link(client: Any, pods: list[JSON], group_of: dict[str, JSON], faults: JSON) -> None:
        nodes = {p["spec"]["nodeName"] for p in pods}
        pair = {names[2], names[3]}
        original(client, pods, group_of, {n: {"ib_port_down": True} for n in pair} if pair <= nodes else {})

    api.model._inter = slow_link  # type: ignore[method-assign]
    evidence = _run(api, _config(4))
    inter = evidence["inter_node"]
    assert inter["status"] == "failed", inter
    assert inter["culprits"] == [f"{names[2]} <-> {names[3]}"], inter["culprits"]
    assert evidence["slow_nodes"] == []  # a link, not a node
    assert [s["step"] for s in inter["search"]].count("halving") == 2


def test_no_infiniband_fails_closed() -> None:
    api = MemoryApi(2, fabric=False)
    evidence = _run(api, _config(2))
    assert evidence["status"] == "failed" and "no result" in evidence["reason"]
    assert any("NET/IB" in e for e in evidence["inter_node"]["errors"])


def test_verify_refuses_while_pods_hold_the_gpus() -> None:
    api = MemoryApi(2)
    api.objects["/api/v1/namespaces/team/pods/train-0"] = {
        "metadata": {"name": "train-0", "namespace": "team", "uid": "u", "labels": {}},
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
        "status": {"phase": "Running"},
    }
    evidence = run_fabric_check(lambda _t: api, _config(2), refuse_while_busy=True)  # type: ignore[arg-type,return-value]
    assert evidence["status"] == "failed" and "team/train-0" in evidence["reason"]
    assert evidence["nodes"] == {} and api.created == []


def test_a_missing_gpu_node_fails_before_any_probe() -> None:
    api = MemoryApi(2)
    evidence = _run(api, _config(3))
    assert evidence["status"] == "failed" and "2 GPU node(s) found, 3 expected" in evidence["reason"]
    assert api.created == []
