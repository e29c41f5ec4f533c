"""A staged rollout on the local cloud, with the real engine and API servers: seven clusters, a canary wave
(research/train, the one GPU cluster), then two waves of three. A change to all seven with a `gpu-missing`
fault on the canary's GPU node (one GPU fewer: its gate fails; a NebiusGPUError node would be held, not
started): `up` exits 1 after the canary's gate fails, names the halted wave, why and
the command that resumes it; no cluster of waves 2 and 3 is updated (their stacks' last update and their
node groups in the simulator are as before) and `status` shows the halt, from the tags beside the stacks.
The PR comment lists the waves. The canary's wave soaks 2 s (its health read clean before the next wave).
A maintenance event on prod/a's node (`local-cloud maintenance add`): the PR comment marks it held; after
`--clear`, the printed resume command deploys the others and holds prod/a with the reason code (exit 0);
then maintenance on the canary as well and another change: the held canary vouches for nothing, so `up`
exits 1 with every later wave closed and every stack as before (`status`: waiting); `up
--ignore-maintenance` then takes both. The spec's `notify: [${ROLL_WEBHOOK}]` sends a receiver in this
test exactly one event, for the halted rollout, and none for the clean runs before and after it.
`make test` runs the same journey over three clusters (the canary, then one per wave); the seven are
`make test-long`'s."""

from __future__ import annotations

import os
import shlex
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import by_stack, inventory, npa, write_spec
from webhook_support import Webhook

from npa_pulumi.simulator.db import db_path

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: roll
region: us-central1
project_prefix: "roll-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
  gpu_health_stabilization_seconds: 1
  gpu_health_timeout_minutes: TIMEOUT
projects:
  - name: research
    clusters:
      - name: train
        gpu_nodes: {count: 1, platform: gpu-rtx6000, preset: 1gpu-24vcpu-218gb}
        enable_gpu_cluster: false
      - name: eval
  - name: prod
    clusters: PROD
rollout:
  waves:
    - clusters: [research/train]
      soak: 2s
    - count: WAVE
    - rest: true
  max_in_flight: 3
notify: ["${ROLL_WEBHOOK}"]
"""
CANARY = "roll.research.train"
SERVICED = "roll.prod.a"  # a maintenance event on its node: a staged up holds it


@dataclass(frozen=True)
class Fleet:
    """The fleet's shape: `prod` clusters in the prod project, the second wave `wave` clusters."""

    prod: tuple[str, ...]
    wave: int

    @property
    def later(self) -> list[str]:
        return ["roll.research.eval", *(f"roll.prod.{name}" for name in self.prod)]

    @property
    def waves(self) -> list[list[str]]:
        later = ["research/eval", *(f"prod/{name}" for name in self.prod)]
        return [["research/train"], later[: self.wave], later[self.wave :]]

    def spec(self, tmp_path: Path, timeout: int) -> str:
        prod = "[" + ", ".join(f"{{name: {name}}}" for name in self.prod) + "]"
        text = SPEC.replace("TIMEOUT", str(timeout)).replace("PROD", prod).replace("WAVE", str(self.wave))
        return str(write_spec(tmp_path / "fleet.yaml", text))


def _last_updates() -> dict[str, Any]:
    listed = npa("stacks", "--fleet", "roll", "--output", "json", check=True).json()["stacks"]
    return {s["name"]: s["last_update"] for s in listed}


def _node_groups(cluster_ids: list[str]) -> list[Any]:
    """The clusters' node groups as the simulator stores them (times and data) and shows them."""
    shown = sorted(
        (g for g in inventory()["node_groups"] if g.get("cluster_id") in cluster_ids),
        key=lambda g: str(g["id"]),
    )
    marks = ",".join("?" * len(cluster_ids))
    with sqlite3.connect(db_path(Path(os.environ["NPA_LOCAL_CLOUD_DIR"]))) as conn:
        stored = conn.execute(
            "SELECT id, created_at, ready_at, data FROM resources WHERE kind = 'node_group' "
            f"AND parent_id IN ({marks}) ORDER BY id",
            cluster_ids,
        ).fetchall()
    assert len(stored) == len(shown) >= len(cluster_ids)
    return [shown, stored]


@pytest.mark.parametrize(
    "fleet",
    [
        pytest.param(Fleet(("a",), 1), id="three-clusters"),
        pytest.param(Fleet(("a", "b", "c", "d", "e"), 3), id="seven-clusters", marks=pytest.mark.long),
    ],
)
def test_a_failed_canary_gate_halts_the_rollout_and_its_resume_finishes_it(
    kube_api: Path, tmp_path: Path, fleet: Fleet, webhook: Webhook
) -> None:
    later, waves = fleet.later, fleet.waves
    hook = {"ROLL_WEBHOOK": webhook.url}  # the spec's notify: ["${ROLL_WEBHOOK}"]
    npa("local-cloud", "init", check=True)
    first = npa(
        "up",
        "--spec",
        fleet.spec(tmp_path, 2),
        "--yes",
        "--no-preflight",
        "--output",
        "json",
        env=hook,
    )
    assert first.code == 0, first.stderr[-2000:] + first.stdout[-6000:]
    assert webhook.events == []  # a clean run posts nothing
    deployed = by_stack(first.json())
    assert all(deployed[s]["status"] == "deployed" for s in [CANARY, *later]), deployed
    assert [w["clusters"] for w in first.json()["rollout"]["waves"]] == waves
    assert [w["state"] for w in first.json()["rollout"]["waves"]] == ["passed"] * 3
    soak = first.json()["rollout"]["waves"][0]["soak"]
    assert soak["clean"] is True and soak["reads"] >= 2 and soak["elapsed_s"] >= 2, soak
    gpu_node = next(n for n, v in deployed[CANARY]["health"]["nodes"].items() if v.get("gpu"))
    later_ids = [deployed[s]["cluster_id"] for s in later]
    before_updates, before_groups = _last_updates(), _node_groups(later_ids)

    # ---- Nebius schedules maintenance on prod/a's node: a staged up will hold that cluster
    serviced_node = sorted(deployed[SERVICED]["health"]["nodes"])[0]
    npa(
        "local-cloud", "maintenance", "add", "--cluster", deployed[SERVICED]["cluster_id"],
        "--node", serviced_node, "--reason", "HW_GPU_XID_79", check=True,
    )  # fmt: skip

    # ---- the PR comment of the change lists the waves and their clusters
    spec = fleet.spec(
        tmp_path, 1
    )  # a gate setting of every cluster changes: every cluster has an update to make
    comment = npa("preview", "--spec", spec, "--stage", "projects", "--no-preflight", "--output", "markdown")
    assert comment.code == 0, comment.stderr[-3000:]
    assert "#### Rollout" in comment.stdout
    for index, clusters in enumerate(waves, start=1):
        row = next(line for line in comment.stdout.splitlines() if line.startswith(f"| {index} |"))
        assert all(f"`{key}`" in row for key in clusters), row
    assert "| 1 | research/train, then soak 2s |" in comment.stdout
    assert "`prod/a` **held**" in comment.stdout
    assert f"- `prod/a`: maintenance HW_GPU_XID_79 on node {serviced_node}" in comment.stdout

    # ---- a GPU fault on the canary: its gate fails, the rollout halts, nothing later is touched
    fault = ["local-cloud", "fault", "node", "--cluster", deployed[CANARY]["cluster_id"], "--node", gpu_node]
    npa(*fault, "--kind", "gpu-missing", check=True)
    halted = npa("up", "--spec", spec, "--yes", "--no-preflight", "--output", "json", env=hook)
    assert halted.code == 1, halted.stderr[-4000:]
    [event] = webhook.events  # the spec's webhook: one event for the halt
    assert event["events"] == ["rollout-halted", "gate-failed"] and event["command"] == "up"
    assert event["rollout_halted"]["wave"] == 1 and "rollout halted at wave 1" in event["text"]
    assert {s["stack"]: s.get("lifecycle") for s in event["stacks"]}[CANARY] == "deployed-validation-failed"
    assert "warning: notification" not in halted.stderr
    document = halted.json()
    stacks = by_stack(document)
    assert stacks[CANARY]["status"] == "deployed-validation-failed", stacks[CANARY]
    assert all(stacks[s]["status"] == "skipped" for s in later), {s: stacks[s]["status"] for s in later}
    assert all("halted at wave 1" in (stacks[s]["error"] or "") for s in later)
    rollout = document["rollout"]
    assert rollout["halted"]["wave"] == 1 and "research/train" in rollout["halted"]["reason"]
    assert [w["state"] for w in rollout["waves"]] == ["halted", "not-started", "not-started"]
    resume = rollout["resume_command"]
    assert resume.startswith("npa-pulumi up ") and "--yes" in resume
    after_updates = _last_updates()
    assert {s: after_updates[s] for s in later} == {s: before_updates[s] for s in later}
    assert after_updates[CANARY] != before_updates[CANARY]
    assert _node_groups(later_ids) == before_groups

    status = npa("status", "--spec", spec, "--output", "json", env=hook).json()["rollout"]
    assert len(webhook.events) == 1  # a read shows the halt again and posts nothing
    assert status["halted"]["wave"] == 1 and status["resume_command"] == resume
    assert [w["state"] for w in status["waves"]] == ["halted", "not-started", "not-started"]

    # ---- fixed: the printed command resumes at the halted wave and finishes the rollout, but for the
    # cluster under maintenance: held with the reason code, never started, while the others proceed
    npa(*fault, "--kind", "gpu-missing", "--clear", check=True)
    argv = shlex.split(resume)
    assert argv[0] == "npa-pulumi"
    resumed = npa(*argv[1:], "--no-preflight", "--output", "json", env=hook)
    assert resumed.code == 0, resumed.stderr[-4000:]
    assert len(webhook.events) == 1  # the clean resume posts nothing
    finished = by_stack(resumed.json())
    others = [s for s in later if s != SERVICED]
    assert all(finished[s]["status"] == "deployed" for s in [CANARY, *others]), finished
    assert all(finished[s]["changes"].get("update", 0) >= 1 for s in others), finished  # the change arrived
    assert finished[SERVICED]["status"] == "held", finished[SERVICED]
    assert "HW_GPU_XID_79" in finished[SERVICED]["error"] and serviced_node in finished[SERVICED]["error"]
    assert _last_updates()[SERVICED] == before_updates[SERVICED]  # its stack untouched
    rolled = resumed.json()["rollout"]["waves"]
    assert [w["state"] for w in rolled] == ["passed"] * 3
    assert [list(w.get("held") or {}) for w in rolled if w.get("held")] == [["prod/a"]]

    # ---- maintenance on the canary too, and a change: a held canary vouches for nothing, so no later wave
    # opens; `up` exits 1 naming it and why, every stack is as before, `status` shows the wave waiting
    canary_cpu = next(n for n, v in deployed[CANARY]["health"]["nodes"].items() if not v.get("gpu"))
    npa(
        "local-cloud", "maintenance", "add", "--cluster", deployed[CANARY]["cluster_id"],
        "--node", canary_cpu, "--reason", "HW_GPU_XID_48", check=True,
    )  # fmt: skip
    changed = fleet.spec(tmp_path, 3)  # a third gate timeout: every cluster has an update to make
    before_held = _last_updates()
    waiting = npa("up", "--spec", changed, "--yes", "--no-preflight", "--output", "json")
    assert waiting.code == 1, waiting.stderr[-4000:]
    stacks = by_stack(waiting.json())
    assert stacks[CANARY]["status"] == "held" and "HW_GPU_XID_48" in stacks[CANARY]["error"]
    assert all(stacks[s]["status"] == "skipped" for s in later), {s: stacks[s]["status"] for s in later}
    assert all("waits at wave 1" in (stacks[s]["error"] or "") for s in later)
    rollout = waiting.json()["rollout"]
    assert "halted" not in rollout and rollout["waiting"]["wave"] == 1
    assert (
        "research/train" in rollout["waiting"]["reason"] and "HW_GPU_XID_48" in rollout["waiting"]["reason"]
    )
    assert [w["state"] for w in rollout["waves"]] == ["waiting"] * 3
    assert "research/train" in waiting.json()["error"] and "--ignore-maintenance" in waiting.json()["error"]
    assert _last_updates() == before_held  # nothing was applied: the canary held, the later waves closed
    shown = npa("status", "--spec", changed, "--output", "json").json()["rollout"]
    assert [w["state"] for w in shown["waves"]] == ["waiting"] * 3
    assert "HW_GPU_XID_48" in shown["waiting"]["held"]["research/train"]

    # ---- --ignore-maintenance is the explicit way past: the canary and prod/a are taken, the rest follow
    taken = npa(
        "up", "--spec", changed, "--yes", "--ignore-maintenance", "--no-preflight", "--output", "json"
    )
    assert taken.code == 0, taken.stderr[-4000:]
    after = by_stack(taken.json())
    assert all(after[s]["status"] == "deployed" for s in [CANARY, *later]), after
    assert all(after[s]["changes"].get("update", 0) >= 1 for s in [CANARY, *later]), after
    marked = [w.get("taken_under_maintenance") or {} for w in taken.json()["rollout"]["waves"]]
    assert "HW_GPU_XID_48" in marked[0].get("research/train", ""), marked
    assert any("HW_GPU_XID_79" in m.get("prod/a", "") for m in marked), marked
