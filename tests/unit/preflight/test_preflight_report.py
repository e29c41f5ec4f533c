"""The preflight runner and its report: JSON contract, ordering, masking, fail-closed reads."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from rich.console import Console

from npa_pulumi.cloud.errors import PermissionDenied, Unavailable
from npa_pulumi.cloud.port import CapacityBlockGroup, CloudPort, QuotaAllowance
from npa_pulumi.errors import EXIT_FAILED, NpaError
from npa_pulumi.preflight import (
    NO_FALLBACK,
    BucketDemandInput,
    ClusterDemandInput,
    PreflightFailed,
    PreflightReport,
    ProjectDemandInput,
    print_report,
    render_text,
    run_preflight,
)

TENANT = "tenant-e00tenant"
R = "eu-north1"
GIB = 2**30
CBG = "capacityblockgroup-e00secretreservation77a1b2"


class FakeCloud:
    """Just the two reads preflight makes; records every call."""

    name = "fake"

    def __init__(
        self,
        allowances: list[QuotaAllowance] | Exception,
        blocks: list[CapacityBlockGroup] | Exception | None = None,
    ) -> None:
        self.allowances = allowances
        self.blocks: list[CapacityBlockGroup] | Exception = [] if blocks is None else blocks
        self.calls: list[tuple[str, str]] = []

    def list_quota_allowances(self, tenant_id: str) -> list[QuotaAllowance]:
        self.calls.append(("allowances", tenant_id))
        if isinstance(self.allowances, Exception):
            raise self.allowances
        return self.allowances

    def list_capacity_block_groups(self, tenant_id: str) -> list[CapacityBlockGroup]:
        self.calls.append(("blocks", tenant_id))
        if isinstance(self.blocks, Exception):
            raise self.blocks
        return self.blocks


def qa(name: str, limit: int | None = 1000, usage: int | None = 0, unit: str = "count") -> QuotaAllowance:
    return QuotaAllowance(name=name, region=R, limit=limit, usage=usage, unit=unit, parent_id=TENANT)


def block(**kw: Any) -> CapacityBlockGroup:
    fields: dict[str, Any] = dict(
        id=CBG, parent_id=TENANT, region=R, platform="gpu-rtx6000", state="ACTIVE", limit=8, usage=0
    )
    fields.update(kw)
    return CapacityBlockGroup(**fields)


CPU = ClusterDemandInput(target="p/cpu", region=R, cpu_count=2, cpu_preset="16vcpu-64gb")
MIG = ClusterDemandInput(
    target="p/mig",
    region=R,
    cpu_count=1,
    cpu_preset="8vcpu-32gb",
    gpu_count=2,
    gpu_platform="gpu-rtx6000",
    gpu_preset="1gpu-24vcpu-218gb",
    gpu_disk_gib=128,
    capacity_block_group=CBG,
    enable_filestore=True,
)


def roomy() -> list[QuotaAllowance]:
    """Finite, generous allowances for everything the CPU and MIG clusters need."""
    return [
        qa("mk8s.cluster.count"),
        qa("vpc.allocation.count"),
        qa("compute.instance.count"),
        qa("compute.disk.count"),
        qa("compute.disk.size.network-ssd", limit=100_000 * GIB, unit="byte"),
        qa("compute.instance.non-gpu.vcpu", unit="vcpu"),
        qa("compute.filesystem.count"),
        qa("compute.filesystem.size.network-ssd", limit=None, usage=None, unit="byte"),
    ]


def run(cloud: FakeCloud, *clusters: ClusterDemandInput, **kw: Any) -> PreflightReport:
    return run_preflight(cast(CloudPort, cloud), TENANT, clusters, **kw)


def test_fitting_fleet_is_ok_and_reads_each_listing_once() -> None:
    cloud = FakeCloud(roomy(), [block()])
    report = run(cloud, CPU, MIG)
    assert report.ok, report.summary()
    assert report.errors == []
    assert sorted(cloud.calls) == [("allowances", TENANT), ("blocks", TENANT)]
    by_name = {ln.name: ln for ln in report.requirements}
    assert by_name["compute.instance.count"].required == 5
    assert by_name["compute.disk.size.network-ssd"].required == (2 * 128 + 128 + 2 * 128) * GIB
    assert by_name["compute.filesystem.size.network-ssd"].status == "unlimited"
    assert by_name["compute.instance.non-gpu.vcpu"].unit == "vcpu"
    assert not any(n.startswith("compute.instance.gpu.") for n in by_name)  # reserved: no family quota
    [cap] = report.capacity_blocks
    assert (cap.status, cap.required_gpus, cap.free_gpus, cap.limit) == ("ok", 2, 8, 8)
    assert any("ordinary GPU quota excluded" in n for n in report.notes)


def test_json_contract_shape_and_integer_bytes() -> None:
    report = run(FakeCloud(roomy(), [block()]), CPU, MIG)
    doc = json.loads(json.dumps(report.to_json()))
    assert {"ok", "requirements", "capacity_blocks", "errors"} <= set(doc)
    assert doc["ok"] is True
    for line in doc["requirements"]:
        assert {"name", "region", "required", "available", "limit", "shortfall", "unit"} <= set(line)
    disk = next(ln for ln in doc["requirements"] if ln["name"] == "compute.disk.size.network-ssd")
    assert disk["unit"] == "byte"
    assert isinstance(disk["required"], int) and disk["required"] == 640 * GIB
    assert isinstance(disk["limit"], int) and disk["limit"] == 100_000 * GIB
    unlimited = next(ln for ln in doc["requirements"] if ln["name"] == "compute.filesystem.size.network-ssd")
    assert unlimited["available"] is None and unlimited["limit"] is None and unlimited["shortfall"] == 0


def test_every_shortfall_is_listed_first() -> None:
    allowances = roomy()
    allowances[2] = qa("compute.instance.count", limit=4, usage=1)  # needs 5, 3 left
    allowances[4] = qa("compute.disk.size.network-ssd", limit=1000 * GIB, usage=900 * GIB, unit="byte")
    report = run(FakeCloud(allowances, [block()]), CPU, MIG)
    assert not report.ok
    statuses = [ln.status for ln in report.requirements]
    assert statuses[:2] == ["shortfall", "shortfall"]
    assert "shortfall" not in statuses[2:]
    short = {ln.name: ln for ln in report.shortfalls}
    assert short["compute.instance.count"].shortfall == 2
    assert short["compute.disk.size.network-ssd"].shortfall == 540 * GIB
    assert short["compute.disk.size.network-ssd"].available == 100 * GIB
    summary = report.summary()
    assert "compute.instance.count" in summary and "compute.disk.size.network-ssd" in summary
    assert "shortfall 540 GiB" in summary


def test_text_rendering_uses_gib_for_bytes() -> None:
    allowances = roomy()
    allowances[4] = qa("compute.disk.size.network-ssd", limit=1000 * GIB, usage=900 * GIB, unit="byte")
    text = render_text(run(FakeCloud(allowances, [block()]), CPU, MIG), width=220)
    row = next(line for line in text.splitlines() if "compute.disk.size.network-ssd" in line)
    for figure in ("640", "100", "1,000", "540", "GiB", "shortfall"):
        assert figure in row
    assert str(640 * GIB) not in text
    assert "preflight FAILED" in text


def test_print_report_on_a_given_console() -> None:
    console = Console(record=True, width=200, color_system=None)
    print_report(run(FakeCloud(roomy(), [block()]), CPU, MIG), console)
    out = console.export_text()
    assert "mk8s.cluster.count" in out
    assert "capacityblockgroup-…a1b2" in out
    assert "preflight ok" in out


def test_capacity_block_id_is_masked_everywhere() -> None:
    # A rejected block puts the id into reasons and errors too.
    report = run(FakeCloud(roomy(), [block(region="us-central1")]), CPU, MIG)
    assert not report.ok
    failed = PreflightFailed(report)
    outputs = [
        json.dumps(report.to_json()),
        render_text(report),
        report.summary(),
        str(failed),
        json.dumps(failed.to_dict()),
        repr(report),
    ]
    for out in outputs:
        assert CBG not in out
        assert "e00secretreservation" not in out
    assert report.capacity_blocks[0].id == "capacityblockgroup-…a1b2"


def test_failed_block_check_fails_preflight_without_on_demand_fallback() -> None:
    allowances = [*roomy(), qa("compute.instance.gpu.rtx6000", limit=1000)]  # plenty on demand
    report = run(FakeCloud(allowances, [block(usage=7)]), CPU, MIG)
    assert not report.ok
    [cap] = report.capacity_blocks
    assert (cap.status, cap.reason) == ("rejected", "needs 2 GPUs, only 1 reserved GPUs remain")
    assert not any(ln.name.startswith("compute.instance.gpu.") for ln in report.requirements)
    assert report.errors[-1].endswith(NO_FALLBACK)
    assert all(ln.status != "shortfall" for ln in report.requirements)  # quotas fit; the block does not


def test_capacity_blocks_ordered_rejected_first() -> None:
    good = "capacityblockgroup-e00goodblock0000zz01"
    other = MIG.model_copy(update={"target": "p/mig2", "capacity_block_group": good})
    report = run(FakeCloud(roomy(), [block(state="DELETING"), block(id=good)]), MIG, other)
    assert [b.status for b in report.capacity_blocks] == ["rejected", "ok"]
    assert report.capacity_blocks[0].reason == "is not active (DELETING)"


@pytest.mark.parametrize(
    "failure",
    [Unavailable("quotas service unavailable"), PermissionDenied("no quota read"), RuntimeError("boom")],
)
def test_failing_allowance_read_fails_closed(failure: Exception) -> None:
    report = run(FakeCloud(failure, [block()]), CPU)
    assert not report.ok
    assert any("could not read tenant quota allowances" in e and str(failure) in e for e in report.errors)
    assert report.requirements and all(ln.status == "error" for ln in report.requirements)
    assert all(ln.shortfall == ln.required and ln.available == 0 for ln in report.requirements)


def test_empty_allowance_read_fails_closed() -> None:
    report = run(FakeCloud([]), CPU)
    assert not report.ok
    assert any("returned nothing" in e for e in report.errors)


def test_failing_or_empty_capacity_read_fails_closed() -> None:
    reads: list[list[CapacityBlockGroup] | Exception] = [Unavailable("capacity down"), []]
    for blocks in reads:
        report = run(FakeCloud(roomy(), blocks), CPU, MIG)
        assert not report.ok
        [cap] = report.capacity_blocks
        assert cap.status == "rejected" and cap.reason == "capacity block groups could not be read"
        assert any(e.endswith(NO_FALLBACK) for e in report.errors)


def test_no_capacity_read_without_reserved_pools() -> None:
    cloud = FakeCloud(roomy(), Unavailable("never asked"))
    report = run(cloud, CPU)
    assert report.ok
    assert cloud.calls == [("allowances", TENANT)]


def test_nothing_to_check_reads_nothing() -> None:
    cloud = FakeCloud(Unavailable("never asked"), Unavailable("never asked"))
    unchanged = CPU.model_copy(update={"unchanged_live_verified": True})
    report = run(cloud, unchanged)
    assert report.ok and report.requirements == [] and report.capacity_blocks == []
    assert cloud.calls == []


def test_missing_required_fails_but_optional_vpc_is_only_reported() -> None:
    cloud = FakeCloud([qa("vpc.subnet.count", limit=5, usage=5)])
    report = run(cloud, projects=[ProjectDemandInput(key="new", region=R)])
    status = {ln.name: ln.status for ln in report.requirements}
    assert status["vpc.network.count"] == "unadvertised"
    assert status["vpc.subnet.count"] == "shortfall"  # advertised finite: checked strictly
    assert report.requirements[0].name == "vpc.subnet.count"
    assert not report.ok
    assert any("vpc.network.count" in n and "unadvertised" in n for n in report.notes)

    only_optional = run(
        FakeCloud([qa("mk8s.cluster.count")]), projects=[ProjectDemandInput(key="n", region=R)]
    )
    assert only_optional.ok
    missing = run(FakeCloud([qa("mk8s.cluster.count")]), CPU)
    assert not missing.ok
    assert {ln.status for ln in missing.requirements if ln.name != "mk8s.cluster.count"} == {"missing"}
    assert any("omitted required allowances" in e and "compute.instance.count" in e for e in missing.errors)


def test_allowance_errors_are_reported_per_quota() -> None:
    allowances = roomy()
    allowances[1] = QuotaAllowance(name="vpc.allocation.count", region=R, limit=10, parent_id=TENANT)
    report = run(FakeCloud(allowances), CPU)
    line = next(ln for ln in report.requirements if ln.name == "vpc.allocation.count")
    assert line.status == "error" and "unusable capacity evidence" in line.detail
    assert any("vpc.allocation.count" in e for e in report.errors)
    assert not report.ok


def test_buckets_are_budgeted_in_bytes() -> None:
    allowances = [
        qa("storage.bucket.count", limit=10, usage=9),
        qa("storage.bucket.size.enhanced-throughput", limit=100 * GIB, usage=0, unit="byte"),
    ]
    buckets = [BucketDemandInput(key="p", region=R, storage_class="enhanced", size_gib=150)]
    report = run(FakeCloud(allowances), buckets=buckets)
    [size] = [ln for ln in report.requirements if ln.name.startswith("storage.bucket.size.")]
    assert (size.required, size.shortfall, size.status) == (150 * GIB, 50 * GIB, "shortfall")


def test_conflicting_block_binding_is_a_report_error_not_an_exception() -> None:
    other = MIG.model_copy(update={"target": "p/other", "gpu_platform": "gpu-rtx6000-a"})
    cloud = FakeCloud(roomy(), [block()])
    report = run(cloud, MIG, other)
    assert not report.ok
    assert any("cannot back incompatible GPU pools" in e and e.endswith(NO_FALLBACK) for e in report.errors)
    assert CBG not in json.dumps(report.to_json())
    assert ("blocks", TENANT) not in cloud.calls


def test_empty_tenant_fails_closed() -> None:
    report = run_preflight(cast(CloudPort, FakeCloud(roomy())), "", [CPU])
    assert not report.ok
    assert any("no tenant id" in e for e in report.errors)


def test_preflight_failed_carries_the_report() -> None:
    allowances = roomy()
    allowances[0] = qa("mk8s.cluster.count", limit=1, usage=1)
    report = run(FakeCloud(allowances), CPU)
    err = PreflightFailed(report)
    assert isinstance(err, NpaError)
    assert err.exit_code == EXIT_FAILED
    assert err.report is report
    assert (
        "mk8s.cluster.count [eu-north1]: needs 1 count, 0 count available from tenant limit 1 count"
        in str(err)
    )
    assert err.to_dict()["preflight"]["ok"] is False
