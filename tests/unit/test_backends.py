"""The backend interface's registry: mk8s is deployable, soperator (planned and validated) is not yet, and
an unknown kind has no backend; the mk8s backend reports the gate's lifecycle state for its plans."""

from __future__ import annotations

from npa_pulumi.engine.backends.base import BackendKind
from npa_pulumi.engine.backends.mk8s import Mk8sBackend
from npa_pulumi.engine.backends.registry import backend_for
from npa_pulumi.engine.programs import ClusterPlan


def _plan(**fields: object) -> ClusterPlan:
    base = dict(fleet="f", project_key="p", project_stack="f.p", cluster_name="c", stack="f.p.c", region="r")
    return ClusterPlan(tenant_id="t", backend="mk8s", **base, **fields)  # type: ignore[arg-type]


def test_the_registry_names_the_deployable_backends() -> None:
    backend = backend_for("mk8s")
    assert isinstance(backend, Mk8sBackend) and backend.kind is BackendKind.MK8S
    assert backend_for("soperator") is None  # not deployable by this version: `up` fails it
    assert backend_for("slurm-on-a-napkin") is None


def test_the_mk8s_gate_state_follows_the_plan() -> None:
    backend = Mk8sBackend()
    assert backend.gate_state(_plan()) == ""  # no gate: no validating state
    gate = {"expected_nodes": 1}
    assert backend.gate_state(_plan(health_gate=gate, has_gpus=True)) == "validating-gpu-health"
    assert backend.gate_state(_plan(health_gate=gate, has_gpus=True, mig_enabled=True)) == "validating-mig"
    assert backend.gate_state(_plan(health_gate=gate)) == "validating-cluster-basics"
