"""What each deployed cluster stack claims for preflight's live proof (engine/preflight_gate.py): every
stack that records a cluster, from any plan and any version (the fingerprint is not read); refused, with
why, when its identity no longer matches its project stack or the plan, and under `--refresh`."""

from __future__ import annotations

from typing import Any, cast

from npa_pulumi.engine.automation import StackOp
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.operations.preflight import REFRESH_REFUSAL, claimed_clusters
from npa_pulumi.plan import resolve_targets
from npa_pulumi.spec import parse_spec

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: claims
region: eu-north1
projects:
  - project_id: project-e00one
    clusters:
      - name: kept
        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
      - name: moved
        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
      - name: fresh
        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
"""
PROJECT_STACK = "claims.project-e00one"


class Context:
    """The three things the claims read of a FleetContext: targets, `--refresh` and the output cache."""

    def __init__(self, outputs: dict[str, dict[str, Any]], refresh: bool = False) -> None:
        self.targets = resolve_targets(parse_spec(SPEC))
        self.refreshing = refresh
        self.outputs = outputs
        self.read: list[str] = []

    def target_ops(self) -> list[StackOp]:
        return [
            StackOp(t.cluster_stack, "cluster", t.project_key, t.cluster_name, None, {}) for t in self.targets
        ]

    def stack_outputs(self, ops: list[StackOp]) -> dict[str, dict[str, Any] | None]:
        self.read += [op.stack for op in ops]
        return {op.stack: self.outputs.get(op.stack) for op in ops}


def _cluster(subnet: str, **extra: Any) -> dict[str, Any]:
    return {
        "project_id": "project-e00one",
        "subnet_id": subnet,
        "cluster_id": f"mk8scluster-e00{subnet[-1]}",
        "npa_fingerprint": "an older npa-pulumi's",
        **extra,
    }


def _claims(refresh: bool = False) -> tuple[dict[str, Any], Context]:
    outputs = {
        PROJECT_STACK: {"project_id": "project-e00one", "subnet_id": "vpcsubnet-e00a"},
        "claims.project-e00one.kept": _cluster(
            "vpcsubnet-e00a",
            filesystem={"id": "computefilesystem-e00fs"},
            live_objects={
                "terraform_data.gpu_cluster[0]": {"kind": "gpu_cluster", "id": "computegpucluster-e00g"},
            },
        ),
        "claims.project-e00one.moved": _cluster("vpcsubnet-e00b"),
        "claims.project-e00one.fresh": {"project_id": "project-e00one"},  # no cluster recorded
    }
    context = Context(outputs, refresh)
    return dict(claimed_clusters(cast(FleetContext, context))), context


def test_every_stack_that_records_a_cluster_claims_it_whatever_its_fingerprint() -> None:
    claims, context = _claims()
    assert sorted(claims) == ["claims.project-e00one.kept", "claims.project-e00one.moved"]
    kept = claims["claims.project-e00one.kept"]
    assert (kept.project_id, kept.cluster_id, kept.refused) == ("project-e00one", "mk8scluster-e00a", "")
    assert kept.records_objects and kept.filesystem_ids == ("computefilesystem-e00fs",)
    assert kept.gpu_cluster_ids == ("computegpucluster-e00g",)
    assert not kept.same_plan  # only soperator stacks are compared with the plan
    assert PROJECT_STACK in context.read  # the identity is checked against the project stack


def test_a_stack_whose_identity_moved_is_refused_with_why() -> None:
    claims, _context = _claims()
    moved = claims["claims.project-e00one.moved"]
    assert "subnet vpcsubnet-e00b is not the plan's vpcsubnet-e00a" in moved.refused
    assert not moved.records_objects and moved.filesystem_ids == () and moved.gpu_cluster_ids == ()


def test_refresh_refuses_every_claim() -> None:
    claims, _context = _claims(refresh=True)
    assert {c.refused for c in claims.values()} == {REFRESH_REFUSAL}


def test_nothing_deployed_claims_nothing_and_reads_no_project_stack() -> None:
    context = Context({})
    assert claimed_clusters(cast(FleetContext, context)) == {}
    assert PROJECT_STACK not in context.read
