"""Issue 59's campaign (benchmarks/remediation_campaign.py): the repair ladder's watch loop against seeded
faults over 20 local clusters (200 GPU nodes, four of them Slurm clusters), with every fault class and
maintenance reason the health model knows, workloads holding GPUs, a bad rollout that trips a breaker.

Quick: 50 faults; long (`make chaos`): 200. What must hold, whatever the seed: every fault detected within
2 watch intervals; every faulted node ends usable after a passing gate, quarantined (flagged for hardware)
or replaced; 0 actions in a scope while its breaker is open (and some were held by one); the watcher's own
reset refused, a person's accepted; 0 repairs under an active workload, 0 pods evicted; 0 nodes usable
without a passing gate."""

from __future__ import annotations

from pathlib import Path

from conftest import SEED, budget

from benchmarks import remediation_campaign


def test_every_fault_is_detected_repaired_and_gated_again_and_no_guard_is_ever_crossed(
    tmp_path: Path,
) -> None:
    faults = budget(50, 200)
    found = remediation_campaign.run(seed=SEED, faults=faults, directory=tmp_path)
    replay = f"(replay: NPA_CHAOS_SEED={SEED})"
    assert found["violations"] == [], replay
    assert found["clusters"] >= 20 and found["faults"] == faults, replay
    assert sum(found["detected_within_intervals"].values()) == faults, replay
    assert max(found["detected_within_intervals"]) <= 2, replay
    assert set(found["outcomes"]) <= {"usable", "quarantined", "replaced"}, replay
    assert sum(found["outcomes"].values()) == faults, replay
    assert found["breaker_trips"] and found["held_by_open_breaker"] > 0, replay
    assert found["watcher_reset_refused"], replay
    # the ladder's rungs were all taken somewhere, the Slurm drains among them
    assert {"requalify", "cordon-and-report", "cloud-recovery", "workload-manager-drain"} <= set(
        found["actions"]
    )
