"""The four gate steps share one provider behaviour (components/_gate.py): what re-runs a gate, what a
refresh and a delete do, and the properties each one judges."""

from __future__ import annotations

from typing import Any

from npa_pulumi.components._gate import CLUSTER_JUDGED, GateInputs, GateOutputs, GateProvider
from npa_pulumi.components.gpu_fabric import GpuFabricCheckProvider
from npa_pulumi.components.gpu_health import GpuHealthGateProvider
from npa_pulumi.components.kuberay_gate import KubeRayGateProvider
from npa_pulumi.components.slurm_gate import SlurmGateProvider

PROPS: dict[str, Any] = {
    "cloud": "local",
    "profile": "",
    "fleet": "f",
    "project_key": "p",
    "cluster_id": "c-1",
    "context": "ctx",
    "server": "https://k",
    "node_group_ids": ["ng-1"],
    "settings": {"a": 1},
}


class _Counting(GateProvider):
    inputs_model = GateInputs
    id_prefix = "test-gate"
    judged = ("settings",)

    def __init__(self) -> None:
        self.runs = 0

    def run(self, inputs: Any) -> GateOutputs:
        self.runs += 1
        return GateOutputs(passed=True, lifecycle="deployed", evidence={"cluster": inputs.cluster_id})


def test_create_and_update_run_the_gate_and_keep_the_inputs() -> None:
    provider = _Counting()
    created = provider.create(dict(PROPS))
    assert created.id == "test-gate-c-1" and provider.runs == 1
    assert created.outs == {**PROPS, "passed": True, "lifecycle": "deployed", "evidence": {"cluster": "c-1"}}
    updated = provider.update("test-gate-c-1", created.outs or {}, dict(PROPS))
    assert provider.runs == 2 and (updated.outs or {})["passed"] is True


def test_a_gate_reruns_when_what_it_judged_changed_or_it_did_not_pass() -> None:
    provider = _Counting()
    passed = {**PROPS, "passed": True}
    assert not provider.diff("id", passed, dict(PROPS)).changes
    assert provider.diff("id", {**PROPS, "passed": False}, dict(PROPS)).changes
    for key, value in [("node_group_ids", ["ng-2"]), ("server", "https://elsewhere"), ("settings", {"a": 2})]:
        assert provider.diff("id", passed, {**PROPS, key: value}).changes, key
    assert not provider.diff("id", passed, {**PROPS, "unjudged": 1}).changes
    assert provider.diff("id", passed, dict(PROPS)).replaces == []


def test_refresh_and_delete_never_run_the_gate() -> None:
    provider = _Counting()
    assert provider.read("id", dict(PROPS)).outs == PROPS
    provider.delete("id", dict(PROPS))
    assert provider.runs == 0


def test_each_gate_judges_the_cluster_and_its_own_settings() -> None:
    assert CLUSTER_JUDGED == ("cluster_id", "context", "server", "node_group_ids")
    assert GpuHealthGateProvider.judged == ("driver", "gate")
    assert GpuFabricCheckProvider.judged == ("fabric", "gate_passed")
    assert KubeRayGateProvider.judged == ("raycluster", "ray")
    assert SlurmGateProvider.judged == ("slurm", "gate")
