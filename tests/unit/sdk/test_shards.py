"""`--shard K/N`: parsing, a partition of the fleet, stability under unrelated changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_pulumi.plan.shards import ShardError, parse_shard, shard_of

NAMES = [f"fleet.project-{p}.cluster-{c}" for p in range(10) for c in range(30)]


def test_parse_shard() -> None:
    shard = parse_shard(" 2 / 5 ")
    assert (shard.index, shard.count, str(shard)) == (2, 5, "2/5")


@pytest.mark.parametrize("text", ["", "3", "0/4", "5/4", "1/0", "a/b", "1/4/2", "-1/4", "1/2000"])
def test_bad_shards_are_input_errors(text: str) -> None:
    with pytest.raises(ShardError) as err:
        parse_shard(text)
    assert err.value.exit_code == 2
    assert "--shard" in str(err.value)


def test_shards_partition_the_fleet_evenly() -> None:
    count = 4
    owners = [[n for n in NAMES if parse_shard(f"{k}/{count}").owns(n)] for k in range(1, count + 1)]
    assert sorted(n for shard in owners for n in shard) == sorted(NAMES)  # every cluster exactly once
    for shard in owners:
        assert 0.15 * len(NAMES) < len(shard) < 0.35 * len(NAMES)


def test_owner_depends_only_on_the_stack_name() -> None:
    before = {n: shard_of(n, 4) for n in NAMES[:100]}
    # Adding unrelated clusters (or computing in another order, on another machine) moves nothing.
    after = {n: shard_of(n, 4) for n in reversed(NAMES)}
    assert all(after[n] == owner for n, owner in before.items())
    assert shard_of("fleet.p.c", 1) == 1


def test_growing_the_shard_count_moves_few_clusters() -> None:
    moved = sum(1 for n in NAMES if shard_of(n, 4) != shard_of(n, 5))
    # Rendezvous hashing: only the clusters the new shard wins move (about 1/5), not a reshuffle.
    assert moved < 0.3 * len(NAMES)
    assert all(shard_of(n, 5) == 5 for n in NAMES if shard_of(n, 4) != shard_of(n, 5))


SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: sdk
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
    clusters: [{name: a}, {name: b}, {name: c}, {name: d}, {name: e}]
"""


def test_the_sdk_selects_a_shard_once(tmp_path: Path) -> None:
    """The SDK's Selection checks and applies `shard` (the engine receives the shard's targets)."""
    from npa_pulumi.plan import resolve_targets
    from npa_pulumi.sdk.fleet import Selection, select
    from npa_pulumi.spec import load_spec

    path = tmp_path / "fleet.yaml"
    path.write_text(SPEC)
    targets = resolve_targets(load_spec(path), [], [], None)
    shards = [[t.cluster_name for t in select(path, Selection(shard=f"{k}/3")).targets] for k in (1, 2, 3)]
    assert sorted(n for shard in shards for n in shard) == ["a", "b", "c", "d", "e"]
    for k, shard in enumerate(shards, start=1):
        assert shard == [t.cluster_name for t in targets if shard_of(t.cluster_stack, 3) == k]
    with pytest.raises(ShardError):
        Selection(shard="4/3")
