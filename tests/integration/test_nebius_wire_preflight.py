"""Preflight (`npa_pulumi.preflight.run_preflight`) fed by the `nebius` adapter through the wire fake.

This is the preflight's own entry point with the real adapter underneath: the allowance catalog comes
from four pages of `QuotaAllowanceService/List`, the reserved capacity from
`CapacityBlockGroupService/List`, and read failures on the wire must fail the report closed.
The CLI-level `npa-pulumi preflight` / `status` runs, with stacks in a temporary Pulumi backend, are in
test_nebius_wire_cli.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from wire.world import TENANT, WireWorld, wire_world

from npa_pulumi.preflight.demand import ClusterDemandInput
from npa_pulumi.preflight.runner import run_preflight

pytestmark = pytest.mark.integration


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WireWorld]:
    with wire_world(tmp_path, monkeypatch) as w:
        yield w


def reserved_cluster(nodes: int) -> ClusterDemandInput:
    return ClusterDemandInput(
        target="a/train",
        region="eu-north1",
        cpu_count=1,
        cpu_preset="4vcpu-16gb",
        gpu_count=nodes,
        gpu_platform="gpu-h100-sxm",
        gpu_preset="8gpu-128vcpu-1600gb",
        capacity_block_group="capacityblockgroup-e00h100",
        infiniband_fabric="fabric-3",
    )


def test_preflight_reads_the_whole_catalog_and_the_reserved_capacity(world: WireWorld) -> None:
    report = run_preflight(world.cloud(), TENANT, clusters=[reserved_cluster(1)])

    pages = world.fake.calls_to("QuotaAllowanceService/List")
    assert [c.request.page_token for c in pages] == ["", "page:2", "page:4", "page:6"]
    assert len(world.fake.calls_to("CapacityBlockGroupService/List")) == 1
    (block,) = report.capacity_blocks
    # 16 reserved, 8 in use: one 8-GPU node fits.
    assert (block.required_gpus, block.free_gpus, block.limit, block.status) == (8, 8, 16, "ok")
    assert "capacityblockgroup-e00h100" not in block.id  # the report masks block ids


def test_preflight_refuses_more_than_the_block_has_left(world: WireWorld) -> None:
    report = run_preflight(world.cloud(), TENANT, clusters=[reserved_cluster(2)])
    (block,) = report.capacity_blocks
    assert (block.required_gpus, block.free_gpus) == (16, 8)
    assert block.status != "ok"
    assert not report.ok


def test_preflight_fails_closed_when_the_wire_refuses(world: WireWorld) -> None:
    world.fake.fail_next(
        "QuotaAllowanceService/List", grpc.StatusCode.PERMISSION_DENIED, message="root-g00root"
    )
    report = run_preflight(world.cloud(), TENANT, clusters=[reserved_cluster(1)])
    assert not report.ok
    assert any("quota allowances" in e and "permission-denied" in e for e in report.errors)
