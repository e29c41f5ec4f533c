"""`maintenance:` windows and exclusions in the spec: where a block may be written, which one a cluster
gets (the most specific wins whole), and a located error for every kind of bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from npa_pulumi.spec import SpecError, SpecProblem, parse_spec
from npa_pulumi.spec.models import FleetSpec

CPU = {"count": 1, "platform": "cpu-d3", "preset": "16vcpu-64gb"}
WINDOW = {"days": ["sat", "sun"], "start": "02:00", "duration": "4h", "time_zone": "Europe/Amsterdam"}
EXCLUSION = {"scope": "no-minor", "end": "2027-01-15", "reason": "release freeze"}


def doc(cluster: dict[str, Any], *, defaults: Any = None, project: Any = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": "p",
        "clusters": [{"cpu_nodes": CPU, **cluster}, {"name": "other", "cpu_nodes": CPU}],
    }
    if project is not None:
        entry["maintenance"] = project
    data: dict[str, Any] = {"apiVersion": "npa.fleet/v0.0.1", "name": "f", "projects": [entry]}
    if defaults is not None:
        data["defaults"] = {"maintenance": defaults}
    return data


def parse(data: dict[str, Any]) -> FleetSpec:
    return parse_spec(json.dumps(data, indent=1), "spec.yaml")


def problems(data: dict[str, Any]) -> list[SpecProblem]:
    with pytest.raises(SpecError) as caught:
        parse(data)
    return caught.value.problems


def test_most_specific_block_wins_whole() -> None:
    fleet_block = {"windows": [WINDOW], "exclusions": [EXCLUSION]}
    project_block = {"windows": [{**WINDOW, "days": ["wed"], "time_zone": "Asia/Kolkata"}]}
    own = {"windows": [{**WINDOW, "days": ["mon"]}]}
    spec = parse(doc({"maintenance": own}, defaults=fleet_block, project=project_block))
    mine, other = spec.projects[0].clusters
    assert mine.maintenance is not None and mine.maintenance.windows[0].days == ["mon"]
    assert other.maintenance is not None and other.maintenance.windows[0].time_zone == "Asia/Kolkata"
    # Whole: the project's block has no exclusions and does not inherit the fleet's.
    assert other.maintenance.exclusions == []
    spec = parse(doc({}, defaults=fleet_block))
    assert all(c.maintenance == spec.projects[0].clusters[0].maintenance for c in spec.projects[0].clusters)
    assert spec.projects[0].clusters[0].maintenance.exclusions[0].scope == "no-minor"  # type: ignore[union-attr]


def test_yaml_times_and_dates_are_read_as_written() -> None:
    # YAML 1.1 reads 02:00 as a base-60 number and 2027-01-15 as a date: both must stay the text written.
    text = """
apiVersion: npa.fleet/v0.0.1
name: f
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 16vcpu-64gb}
  maintenance:
    windows: [{days: [sat], start: 02:00, duration: 90m, time_zone: UTC}]
    exclusions: [{scope: no-upgrades, end: 2027-01-15}]
projects: [{name: p}]
"""
    block = parse_spec(text, "s.yaml").projects[0].clusters[0].maintenance
    assert block is not None
    assert block.windows[0].start == "02:00" and block.exclusions[0].end == "2027-01-15"


def test_soperator_cluster_takes_a_block_beside_its_payload() -> None:
    data = doc({})
    data["projects"][0]["clusters"] = [
        {
            "name": "slurm",
            "backend": "soperator",
            "maintenance": {"windows": [WINDOW]},
            "soperator": {"workers": [{"name": "cpu", "size": 1}]},
        }
    ]
    try:
        spec = parse(data)
    except SpecError as err:  # other soperator rules are not this test's concern
        assert not [p for p in err.problems if "maintenance" in p.path], err.problems
        return
    assert spec.projects[0].clusters[0].maintenance is not None


def test_pin_is_a_pool_field() -> None:
    spec = parse(doc({"cpu_nodes": {**CPU, "pin": True}}))
    pool = spec.projects[0].clusters[0].cpu_nodes
    assert pool is not None and pool.pin is True


BAD: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "zone",
        {"windows": [{**WINDOW, "time_zone": "Europe/Atlantis"}]},
        "windows[0].time_zone",
        "unknown time zone",
    ),
    ("day", {"windows": [{**WINDOW, "days": ["sat", "funday"]}]}, "windows[0].days[1]", "not a day"),
    ("start", {"windows": [{**WINDOW, "start": "25:00"}]}, "windows[0].start", "not a time of day"),
    ("no-start", {"windows": [{**WINDOW, "start": ""}]}, "windows[0].start", "needs a start"),
    ("zero", {"windows": [{**WINDOW, "duration": "0m"}]}, "windows[0].duration", "above 0"),
    ("long", {"windows": [{**WINDOW, "duration": "169h"}]}, "windows[0].duration", "at most 7 days"),
    ("no-end", {"exclusions": [{"scope": "no-minor"}]}, "exclusions[0].end", "needs an end"),
    ("bad-end", {"exclusions": [{**EXCLUSION, "end": "next week"}]}, "exclusions[0].end", "not a date"),
    (
        "scope",
        {"exclusions": [{**EXCLUSION, "scope": "no-fridays"}]},
        "exclusions[0].scope",
        "unknown exclusion",
    ),
    (
        "order",
        {"exclusions": [{**EXCLUSION, "start": "2027-02-01"}]},
        "exclusions[0].end",
        "end after it starts",
    ),
]


@pytest.mark.parametrize(("block", "rel", "fragment"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
@pytest.mark.parametrize("level", ["cluster", "project", "defaults"])
def test_bad_input_is_located(block: dict[str, Any], rel: str, fragment: str, level: str) -> None:
    if level == "cluster":
        data, prefix = doc({"maintenance": block}), "projects[0].clusters[0].maintenance."
    elif level == "project":
        data, prefix = doc({}, project=block), "projects[0].maintenance."
    else:
        data, prefix = doc({}, defaults=block), "defaults.maintenance."
    found = problems(data)
    matching = [p for p in found if fragment in p.message and p.line is not None]
    assert matching, [(p.path, p.message) for p in found]
    # A value inherited from `defaults` keeps the cluster's path and names the nearest written key.
    inherited = f"inherited from {prefix.rstrip('.')}"
    assert any(p.path == prefix + rel or inherited in p.message for p in matching), [
        (p.path, p.message) for p in matching
    ]
    assert all(p.hint or "after it starts" in p.message for p in matching)


def test_unknown_key_in_a_window_is_refused() -> None:
    found = problems(doc({"maintenance": {"windows": [{**WINDOW, "tz": "UTC"}]}}))
    assert any("tz" in p.path for p in found)
