"""What each simulated object charges, and how usage is reported."""

from __future__ import annotations

import pytest

from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator.accounting import GIB, Charge


def _charges(**kwargs: object) -> dict[str, int]:
    defaults: dict[str, object] = {
        "platform": "cpu-d3",
        "preset": "16vcpu-64gb",
        "node_count": 2,
        "disk_type": "NETWORK_SSD",
        "disk_size_gib": 128,
        "preemptible": False,
        "capacity_block_id": None,
    }
    defaults.update(kwargs)
    return {c.target: c.amount for c in acct.node_group_charges(**defaults)}  # type: ignore[arg-type]


def test_preset_and_platform_parsing() -> None:
    assert acct.vcpus_of("16vcpu-64gb") == 16
    assert acct.gpus_of("8gpu-128vcpu-1600gb") == 8
    assert acct.vcpus_of("8gpu-128vcpu-1600gb") == 128
    assert acct.gpus_of("16vcpu-64gb") == 0
    assert acct.gpu_family("gpu-h200-sxm") == "h200"
    assert acct.gpu_family("gpu-rtx6000-a") == "rtx6000"
    assert acct.gpu_family("cpu-d3") == ""
    assert acct.size_quota("compute.disk.size.", "NETWORK_SSD_NON_REPLICATED") == (
        "compute.disk.size.network-ssd-non-replicated"
    )


def test_cpu_nodes_charge_instances_disks_vcpus_and_two_allocations_each() -> None:
    assert _charges() == {
        "compute.instance.count": 2,
        "compute.disk.count": 2,
        "compute.disk.size.network-ssd": 2 * 128 * GIB,
        "vpc.allocation.count": 4,
        "compute.instance.non-gpu.vcpu": 32,
    }


def test_gpu_nodes_charge_gpus_by_family_and_never_their_vcpus() -> None:
    charged = _charges(
        platform="gpu-h200-sxm", preset="8gpu-128vcpu-1600gb", node_count=3, disk_size_gib=1023
    )
    assert charged["compute.instance.gpu.h200"] == 24
    assert "compute.instance.non-gpu.vcpu" not in charged
    assert charged["compute.disk.size.network-ssd"] == 3 * 1023 * GIB


def test_preemptible_gpu_nodes_charge_the_preemptible_count_and_no_gpu_quota() -> None:
    charged = _charges(platform="gpu-h200-sxm", preset="8gpu-128vcpu-1600gb", preemptible=True)
    assert charged["compute.instance.preemptible.count"] == 2
    assert "compute.instance.count" not in charged
    assert not any(name.startswith("compute.instance.gpu.") for name in charged)


def test_reserved_gpu_nodes_charge_the_capacity_block_instead_of_gpu_quota() -> None:
    charged = _charges(
        platform="gpu-rtx6000", preset="1gpu-16vcpu-64gb", capacity_block_id="capacityblockgroup-x"
    )
    assert charged["capacityblock:capacityblockgroup-x"] == 2
    assert "compute.instance.gpu.rtx6000" not in charged
    assert charged["compute.instance.count"] == 2


def test_zero_nodes_charge_nothing() -> None:
    assert _charges(node_count=0) == {}


def test_shortfall_description_names_the_quota_and_numbers() -> None:
    shortfall = acct.Shortfall("compute.instance.gpu.h200", "us-central1", 0, 0, 8)
    assert (
        shortfall.describe() == "quota compute.instance.gpu.h200 [us-central1]: limit 0, usage 0, requested 8"
    )
    block = acct.Shortfall("capacityblock:capacityblockgroup-a", "us-central1", 8, 6, 4)
    assert block.is_capacity_block and block.name == "capacityblockgroup-a"
    assert block.describe().startswith("capacity block group capacityblockgroup-a [us-central1]")


@pytest.mark.parametrize(
    ("base_usage", "base_pct", "limit", "consumed", "expected"),
    [
        (0, None, 10, 0, {"usage": 0, "usage_percentage": 0.0, "usage_state": "NOT_USED"}),
        (2, None, 10, 3, {"usage": 5, "usage_percentage": 0.5, "usage_state": "USED"}),
        (None, 0.25, 8, 2, {"usage": None, "usage_percentage": 0.5, "usage_state": "USED"}),
        (None, None, 10, 0, {"usage": None, "usage_percentage": None, "usage_state": ""}),
        (0, None, None, 4, {"usage": 4, "usage_percentage": None, "usage_state": "USED"}),
    ],
)
def test_usage_reporting(
    base_usage: int | None,
    base_pct: float | None,
    limit: int | None,
    consumed: int,
    expected: dict[str, object],
) -> None:
    assert acct._usage_fields(base_usage, base_pct, limit, consumed, "") == expected


def test_configured_usage_state_holds_until_something_is_consumed() -> None:
    assert acct._usage_fields(None, None, 10, 0, "NOT_USED")["usage_state"] == "NOT_USED"
    assert acct._usage_fields(None, None, 10, 1, "NOT_USED")["usage_state"] == "USED"


def test_a_percentage_baseline_counts_against_the_limit() -> None:
    assert acct._effective_baseline(None, 0.75, 8) == 6
    assert acct._effective_baseline(None, 75.0, 8) == 6  # a percent, not a fraction
    assert acct._effective_baseline(3, 0.75, 8) == 3
    assert Charge("x", 1).amount == 1
