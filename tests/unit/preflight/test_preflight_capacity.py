"""STRICT capacity block checks (reference §5 "Capacity blocks")."""

from __future__ import annotations

from typing import Any

import pytest

from npa_pulumi.cloud.port import CapacityBlockGroup
from npa_pulumi.cloud.redaction import mask_id
from npa_pulumi.preflight.capacity import (
    NO_FALLBACK,
    capacity_failure_message,
    check_capacity_blocks,
    free_gpus,
)
from npa_pulumi.preflight.demand import CapacityDemand

TENANT = "tenant-e00tenant"
R = "eu-north1"
CBG = "capacityblockgroup-e00h200reservation9c4f"


def block(**kw: Any) -> CapacityBlockGroup:
    fields: dict[str, Any] = {
        "id": CBG,
        "parent_id": TENANT,
        "region": R,
        "platform": "gpu-h200-sxm",
        "fabric": "fabric-2",
        "state": "ACTIVE",
        "limit": 32,
        "usage": 8,
    }
    fields.update(kw)
    return CapacityBlockGroup(**fields)


def need(gpus: int = 16, fabric: str = "fabric-2", **kw: Any) -> CapacityDemand:
    fields: dict[str, Any] = {"block_id": CBG, "region": R, "platform": "gpu-h200-sxm", "fabric": fabric}
    fields.update(kw)
    return CapacityDemand(required_gpus=gpus, **fields)


def reason(demand: CapacityDemand, *blocks: CapacityBlockGroup) -> str:
    [check] = check_capacity_blocks([demand], list(blocks), TENANT)
    return check.reason


@pytest.mark.parametrize(
    ("kw", "free"),
    [
        ({"usage": 8}, 24),
        ({"usage": 40}, 0),
        ({"usage": None, "usage_percentage": 0.25}, 24),
        ({"usage": None, "usage_percentage": 0.3}, 22),  # floor(22.4)
        ({"usage": None, "usage_percentage": 1.0}, 0),
        ({"usage": None, "usage_percentage": 50.0}, 16),  # above 1: read as a percent
        ({"usage": None, "usage_percentage": 150.0}, 0),
        ({"usage": None, "usage_state": "NOT_USED"}, 32),
        ({"usage": None, "usage_state": "USAGE_STATE_NOT_USED"}, 32),
        ({"usage": None}, None),
        ({"usage": None, "usage_state": "USED"}, None),
        ({"usage": -1}, None),
        ({"usage": None, "usage_percentage": -0.5}, None),
        ({"usage": None, "usage_percentage": float("nan")}, None),
        ({"limit": -1}, None),
    ],
)
def test_free_gpus(kw: dict[str, Any], free: int | None) -> None:
    assert free_gpus(block(**kw)) == free


def test_accepts_a_fitting_block() -> None:
    [check] = check_capacity_blocks([need(24)], [block(id="capacityblockgroup-other"), block()], TENANT)
    assert check.ok
    assert check.free_gpus == 24
    assert check.block is not None and check.block.id == CBG


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"parent_id": "tenant-e00someoneelse"}, "belongs to another tenant"),
        ({"state": "CREATING"}, "is not active (CREATING)"),
        ({"state": ""}, "is not active (unknown)"),
        ({"region": "us-central1"}, "region 'us-central1' does not match 'eu-north1'"),
        ({"platform": "gpu-b200-sxm"}, "platform 'gpu-b200-sxm' does not match 'gpu-h200-sxm'"),
        ({"fabric": "fabric-7"}, "fabric 'fabric-7' does not match 'fabric-2'"),
        ({"usage": None}, "remaining GPU capacity is unavailable"),
        ({"usage": 20}, "needs 16 GPUs, only 12 reserved GPUs remain"),
        ({"usage": None, "usage_percentage": 0.75}, "needs 16 GPUs, only 8 reserved GPUs remain"),
    ],
)
def test_rejections(kw: dict[str, Any], expected: str) -> None:
    assert reason(need(16), block(**kw)) == expected


def test_not_found() -> None:
    assert reason(need(), block(id="capacityblockgroup-e00different")) == "not found in tenant"
    assert reason(need()) == "not found in tenant"


def test_state_active_raw_spelling_is_accepted() -> None:
    assert reason(need(), block(state="STATE_ACTIVE")) == ""


def test_fabric_only_checked_when_required() -> None:
    assert reason(need(16, fabric=""), block(fabric="fabric-7")) == ""


def test_checks_run_in_order_and_stop_at_the_first_failure() -> None:
    bad = block(parent_id="tenant-x", state="CREATING", region="us-central1", usage=32)
    assert reason(need(), bad) == "belongs to another tenant"
    assert reason(need(), block(state="CREATING", region="us-central1")) == "is not active (CREATING)"
    assert reason(need(), block(region="us-central1", platform="gpu-b200-sxm")).startswith("region")
    assert reason(need(), block(platform="gpu-b200-sxm", fabric="x", usage=None)).startswith("platform")


def test_id_listed_twice_with_different_evidence_is_rejected() -> None:
    assert reason(need(), block(), block(usage=0)) == "listed more than once with different evidence"
    assert reason(need(), block(), block()) == ""


def test_failure_message_lists_every_block_and_ends_with_no_fallback() -> None:
    other = "capacityblockgroup-e00second0000blockzz99"
    checks = check_capacity_blocks(
        [need(16), need(8, block_id=other), need(1, block_id="capacityblockgroup-e00fits00001")],
        [block(usage=30), block(id=other, region="us-central1"), block(id="capacityblockgroup-e00fits00001")],
        TENANT,
    )
    assert [c.ok for c in checks] == [False, False, True]
    message = capacity_failure_message(checks)
    assert message.endswith(NO_FALLBACK)
    assert "will not fall back to on-demand capacity" in message
    assert f"{mask_id(CBG)}: needs 16 GPUs, only 2 reserved GPUs remain" in message
    assert f"{mask_id(other)}: region 'us-central1'" in message
    assert "fits00001" not in message.replace(mask_id("capacityblockgroup-e00fits00001"), "")
    assert CBG not in message and other not in message


def test_mask_id_never_reveals_the_full_id() -> None:
    assert mask_id(CBG) == "capacityblockgroup-…9c4f"
    for raw in [CBG, "abcd", "ab", "x-", "-abc", "capacityblockgroup-e00a"]:
        assert raw not in mask_id(raw)
        assert "…" in mask_id(raw)
