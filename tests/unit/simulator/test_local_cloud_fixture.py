"""The tenant fixture: its model, its validation, and the fixtures the product ships."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_pulumi.simulator.fixture import (
    FixtureError,
    QuotaSpec,
    TenantFixture,
    default_fixture_path,
    load_fixture,
)

REPO = Path(__file__).resolve().parents[3]

# Every quota name the fleet preflight reads (reference §5), with the GPU families the fixture covers.
SECTION5_QUOTAS = {
    "mk8s.cluster.count",
    "vpc.allocation.count",
    "compute.instance.count",
    "compute.instance.preemptible.count",
    "compute.instance.gpu.rtx6000",
    "compute.instance.gpu.h200",
    "compute.disk.count",
    "compute.disk.size.network-ssd",
    "compute.instance.non-gpu.vcpu",
    "compute.gpucluster.count",
    "compute.filesystem.count",
    "compute.filesystem.size.network-ssd",
    "storage.bucket.count",
    "storage.bucket.size.standard",
    "storage.bucket.size.enhanced-throughput",
    "storage.bucket.size.intelligent",
    "vpc.network.count",
    "vpc.subnet.count",
    "vpc.pool.count",
    "vpc.routetable.count",
    "vpc.route.count",
}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tenant.yaml"
    path.write_text(text)
    return path


def test_default_fixture_covers_every_preflight_quota_in_both_regions() -> None:
    fixture, _ = load_fixture(default_fixture_path())
    assert fixture.tenant_id == "tenant-local"
    assert set(fixture.regions) == {"us-central1", "eu-north1"}
    for region in fixture.regions:
        names = {q.name for q in fixture.quotas if q.region == region}
        assert names >= SECTION5_QUOTAS, SECTION5_QUOTAS - names
    byte_quotas = [q for q in fixture.quotas if ".size." in q.name]
    assert byte_quotas and all(q.unit == "byte" for q in byte_quotas)
    # generous: every finite limit leaves room for a demo fleet
    assert all(q.limit is None or q.limit >= 10 for q in fixture.quotas)


def test_default_fixture_has_capacity_blocks_and_an_existing_project() -> None:
    fixture, _ = load_fixture(default_fixture_path())
    blocks = {b.id: b for b in fixture.capacity_block_groups}
    assert blocks["capacityblockgroup-local1"].platform == "gpu-rtx6000"
    assert blocks["capacityblockgroup-local1"].region == "us-central1"
    assert blocks["capacityblockgroup-local1"].limit == 8
    projects = {p.id: p for p in fixture.projects}
    assert projects["project-existing1"].region == "us-central1"


def test_examples_fixture_is_a_symlink_to_the_packaged_one() -> None:
    example = REPO / "examples" / "local-tenant.yaml"
    assert example.is_symlink()
    assert example.resolve() == default_fixture_path().resolve()


def test_short_fixture_has_no_gpu_quota() -> None:
    fixture, _ = load_fixture(REPO / "examples" / "local-tenant-short.yaml")
    gpu = [q for q in fixture.quotas if q.name.startswith("compute.instance.gpu.")]
    assert gpu and all(q.limit == 0 for q in gpu)


def test_usage_defaults_to_zero_but_a_percentage_alone_reports_no_count() -> None:
    plain = QuotaSpec(name="a", region="r")
    with_pct = QuotaSpec(name="a", region="r", limit=10, usage_percentage=0.5)
    explicit_null = QuotaSpec.model_validate({"name": "a", "region": "r", "limit": 10, "usage": None})
    both = QuotaSpec(name="a", region="r", limit=10, usage=3, usage_percentage=0.3)
    assert plain.baseline_usage() == 0
    assert with_pct.baseline_usage() is None
    assert explicit_null.baseline_usage() is None
    assert both.baseline_usage() == 3


def test_api_style_enum_prefixes_are_normalised() -> None:
    quota = QuotaSpec(name="a", region="r", state="STATE_ACTIVE", usage_state="USAGE_STATE_NOT_USED")
    assert (quota.state, quota.usage_state) == ("ACTIVE", "NOT_USED")


def test_project_scope_needs_a_project_parent() -> None:
    with pytest.raises(ValueError, match="project-scoped"):
        QuotaSpec(name="a", region="r", scope="project")
    with pytest.raises(ValueError, match="unscoped"):
        QuotaSpec(name="a", region="r", scope="unscoped", parent_id="tenant-x")
    assert QuotaSpec(name="a", region="r", scope="project", parent_id="project-1").parent_id == "project-1"


def test_records_outside_the_tenant_regions_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"quotas\[0\]\.region 'mars-1'"):
        TenantFixture.model_validate(
            {"tenant_id": "t", "regions": ["us-central1"], "quotas": [{"name": "x", "region": "mars-1"}]}
        )


def test_load_fixture_reports_the_file_and_the_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "tenant_id: t\nregions: [us-central1]\nquotas:\n  - {name: x, region: us-central1, lmit: 3}\n",
    )
    with pytest.raises(FixtureError) as caught:
        load_fixture(path)
    assert str(path) in str(caught.value)
    assert "quotas.0.lmit" in str(caught.value)
    assert caught.value.exit_code == 2


def test_load_fixture_rejects_non_mappings_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(FixtureError, match="mapping"):
        load_fixture(_write(tmp_path, "- just\n- a list\n"))
    with pytest.raises(FixtureError, match="not valid YAML"):
        load_fixture(_write(tmp_path, "tenant_id: [unclosed\n"))
    with pytest.raises(FixtureError, match="cannot read"):
        load_fixture(tmp_path / "missing.yaml")


def test_capacity_block_ids_and_project_ids_are_nebius_style() -> None:
    with pytest.raises(ValueError, match="capacityblockgroup-"):
        TenantFixture.model_validate(
            {
                "tenant_id": "t",
                "regions": ["r"],
                "capacity_block_groups": [{"id": "cbg-1", "region": "r", "platform": "p", "limit": 1}],
            }
        )
    with pytest.raises(ValueError, match="project-"):
        TenantFixture.model_validate(
            {"tenant_id": "t", "regions": ["r"], "projects": [{"id": "proj1", "name": "n", "region": "r"}]}
        )
