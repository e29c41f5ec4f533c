"""The backend interface's registry: mk8s and soperator are deployable, and an unknown kind has no backend;
each backend reports its gate's lifecycle state for its plans."""

from __future__ import annotations

from npa_pulumi.engine.backends.base import BackendKind
from npa_pulumi.engine.backends.mk8s import Mk8sBackend
from npa_pulumi.engine.backends.registry import backend_for
from npa_pulumi.engine.backends.soperator import SoperatorBackend
from npa_pulumi.engine.programs import ClusterPlan


def _plan(**fields: object) -> ClusterPlan:
    base = dict(fleet="f", project_key="p", project_stack="f.p", cluster_name="c", stack="f.p.c", region="r")
    fields.setdefault("backend", "mk8s")
    return ClusterPlan(tenant_id="t", **base, **fields)  # type: ignore[arg-type]


def test_the_registry_names_the_deployable_backends() -> None:
    backend = backend_for("mk8s")
    assert isinstance(backend, Mk8sBackend) and backend.kind is BackendKind.MK8S
    soperator = backend_for("soperator")
    assert isinstance(soperator, SoperatorBackend) and soperator.kind is BackendKind.SOPERATOR
    assert backend_for("slurm-on-a-napkin") is None


def test_the_mk8s_gate_state_follows_the_plan() -> None:
    backend = Mk8sBackend()
    assert backend.gate_state(_plan()) == ""  # no gate: no validating state
    gate = {"expected_nodes": 1}
    assert backend.gate_state(_plan(health_gate=gate, has_gpus=True)) == "validating-gpu-health"
    assert backend.gate_state(_plan(health_gate=gate, has_gpus=True, mig_enabled=True)) == "validating-mig"
    assert backend.gate_state(_plan(health_gate=gate)) == "validating-cluster-basics"


def test_the_soperator_gate_state_is_validating_slurm() -> None:
    backend = SoperatorBackend()
    assert backend.gate_state(_plan(backend="soperator")) == ""  # --no-health-gate: no gate, no state
    slurm = {"name": "soperator", "namespace": "soperator", "nodesets": {"cpu": 2}, "timeout_s": 60.0}
    assert backend.gate_state(_plan(slurm=slurm)) == "validating-slurm"
