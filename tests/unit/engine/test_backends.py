"""The backend interface's registry: mk8s and soperator are deployable, and an unknown kind has no backend;
each backend reports its gate's lifecycle state for its plans."""

from __future__ import annotations

from npa_pulumi.engine.backends.base import BackendKind
from npa_pulumi.engine.backends.mk8s import Mk8sBackend
from npa_pulumi.engine.backends.registry import backend_for
from npa_pulumi.engine.backends.soperator import SoperatorBackend
from npa_pulumi.engine.programs import ClusterPlan
from npa_pulumi.kube.slurm_check import SlurmGateConfig


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
    slurm = SlurmGateConfig(name="soperator", namespace="soperator", nodesets={"cpu": 2}, timeout_s=60.0)
    assert backend.gate_state(_plan(backend_gate=slurm)) == "validating-slurm"


def test_every_kind_of_the_vocabulary_has_its_folder() -> None:
    from npa_pulumi.engine.backends.registry import BACKENDS

    assert list(BACKENDS) == list(BackendKind)  # the registry finds each by its kind's name, in order
    assert all(backend.kind is kind for kind, backend in BACKENDS.items())


def test_a_stack_names_the_backend_that_deployed_it() -> None:
    from npa_pulumi.engine.backends.registry import recorded_backend

    assert isinstance(recorded_backend({}), Mk8sBackend)  # mk8s stacks record no `backend`
    assert isinstance(recorded_backend({"backend": "soperator"}), SoperatorBackend)
    assert recorded_backend({"backend": "slurm-on-a-napkin"}) is None


def test_the_backends_answer_what_the_fleet_asks_instead_of_their_names() -> None:
    from npa_pulumi.engine.backends.registry import kinds_where

    assert kinds_where(lambda b: b.uses_object_storage) == [BackendKind.MK8S]
    assert kinds_where(lambda b: b.adoptable) == [BackendKind.MK8S]
    assert kinds_where(lambda b: b.claims_need_same_plan) == [BackendKind.SOPERATOR]


def test_each_backend_reads_its_own_recorded_status() -> None:
    ray = {"ready": True, "ready_workers": 2, "desired_workers": 2}
    slurm = {"name": "soperator", "phase": "Available"}
    outputs = {"kuberay": ray, "slurm_status": slurm}
    assert Mk8sBackend().recorded_status(outputs).seen() == {"kuberay": ray}  # each its own fields only
    assert SoperatorBackend().recorded_status(outputs).seen() == {"slurm": {**slurm, "source": "gate"}}
    assert SoperatorBackend().recorded_status({"slurm_status": {}}).seen() == {}  # the gate saw nothing
    assert Mk8sBackend().recorded_status({"kuberay": "junk"}).seen() == {}


def test_what_a_backend_sees_are_fields_of_the_clusters_result() -> None:
    from npa_pulumi.output.results import StackResult

    ray = {"ready": True, "ready_workers": 2, "desired_workers": 2}
    slurm = {"name": "soperator", "phase": "Available"}
    outputs = {"kuberay": ray, "slurm_status": slurm}
    for backend in (Mk8sBackend(), SoperatorBackend()):
        assert set(backend.recorded_status(outputs).seen()) <= set(StackResult.model_fields)


def test_preflight_reports_node_pool_clusters_first_whatever_the_target_order() -> None:
    from npa_pulumi.preflight.live_proof import ProjectObjects
    from npa_pulumi.preflight.report import DeployedClusterLine
    from npa_pulumi.preflight.targets import DeployedLedger

    def line(stack: str) -> DeployedClusterLine:
        return DeployedClusterLine(target=stack, stack=stack, charge="full", reasons=["x"])

    ledger = DeployedLedger(ProjectObjects(credited=set()), [], [line("slurm"), line("a"), line("b")])
    ledger.pools_first(["b", "a"])
    assert [item.stack for item in ledger.lines] == ["a", "b", "slurm"]  # target order within each kind
    assert ledger.notes == [item.describe() for item in ledger.lines]
