"""Terraform's own plan in every preview (issue #15 part 1): a cluster whose bridge inputs changed shows the
resources Terraform will add / change / destroy / replace, with destructive replacements flagged, in the JSON
and in the pull-request markdown; an unchanged fleet's preview runs no terraform plan."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fleet_helpers import inventory, npa, write_spec

from npa_pulumi.output.markdown import COMMENT_LIMIT, code

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: tfplan
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - project_id: project-existing1
    clusters:
      - name: gpu
        gpu_nodes: {count: 1, platform: gpu-rtx6000, preset: PRESET}
      - name: cpu
"""
STACK = "tfplan.project-existing1.gpu"
GPU_GROUP = "nebius_mk8s_v1_node_group.gpu[0]"


def test_terraform_s_plan_classes_a_preset_change_and_flags_a_removed_gpu_pool_as_destructive(
    isolated_home: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC.replace("PRESET", "1gpu-24vcpu-218gb"))
    npa("local-cloud", "init", check=True)
    up = npa("up", "--spec", str(spec), "--yes", "--no-health-gate", "--output", "json")
    assert up.code == 0, up.stderr[-3000:]
    work = isolated_home / ".npa-pulumi" / "work" / STACK / "k8s-training"
    state_before = (work / "terraform.tfstate").read_bytes()

    # Unchanged: the fast path runs no terraform plan at all.
    same = npa("preview", "--spec", str(spec), "--output", "json")
    assert same.code == 0, same.stderr[-3000:]
    assert all(s["terraform"] is None for s in same.json()["stacks"])

    # A preset change: upstream's node group takes it in place (Terraform's plan says so, nothing assumed),
    # and it still rolls every node, so the change is disruptive without being destructive.
    write_spec(spec, SPEC.replace("PRESET", "2gpu-48vcpu-436gb"))
    changed = npa("preview", "--spec", str(spec), "--output", "json")
    assert changed.code == 0, changed.stderr[-3000:]
    clusters = {c["stack"]: c for c in changed.json()["clusters"]}
    assert clusters["tfplan.project-existing1.cpu"]["terraform"] is None  # its inputs did not change
    plan = clusters[STACK]["terraform"]
    (group,) = [r for r in plan["resources"] if r["kind"] == "node_group"]
    assert group["address"] == GPU_GROUP
    assert group["action"] == "update" and group["destructive"] is False
    preset = next(a for a in group["attributes"] if a["name"] == "template.resources.preset")
    assert (preset["before"], preset["after"]) == ("1gpu-24vcpu-218gb", "2gpu-48vcpu-436gb")
    assert group["disruption"] == {
        "class": "disruptive",
        "reason": "node template change (template.resources.preset): every node re-created",
    }
    assert clusters[STACK]["disruption"]["class"] == "disruptive"
    assert clusters["tfplan.project-existing1.cpu"].get("disruption") is None  # not previewed: no class
    assert not [v for v in clusters[STACK]["policy"] if v["policy"] == "gpu-node-group-replacement"]

    # The GPU pool removed: its node group is deleted, which the policy and the PR comment flag.
    write_spec(
        spec,
        SPEC.replace("gpu_nodes: {count: 1, platform: gpu-rtx6000, preset: PRESET}", "gpu_nodes: {count: 0}"),
    )
    removed = npa("preview", "--spec", str(spec), "--output", "json")
    assert removed.code == 0, removed.stderr[-3000:]
    cluster = {c["stack"]: c for c in removed.json()["clusters"]}[STACK]
    (group,) = [r for r in cluster["terraform"]["resources"] if r["kind"] == "node_group"]
    assert (group["address"], group["action"], group["destructive"]) == (GPU_GROUP, "delete", True)
    assert group["disruption"] == {
        "class": "disruptive",
        "reason": "node group deleted: its nodes are drained",
    }
    assert cluster["disruption"]["reasons"][0]["resource"] == GPU_GROUP
    # The advisory policy read Terraform's plan (handed in through its config) and warns on that stack only.
    (warning,) = [v for v in cluster["policy"] if v["policy"] == "gpu-node-group-replacement"]
    assert warning["level"] == "advisory"
    assert GPU_GROUP in warning["message"]
    # Read-only: the stack's Terraform state and lock are untouched, and nothing was applied.
    assert (work / "terraform.tfstate").read_bytes() == state_before
    assert not (work / ".terraform.tfstate.lock.info").exists()

    markdown = npa("preview", "--spec", str(spec), "--output", "markdown")
    assert markdown.code == 0, markdown.stderr[-3000:]
    document = markdown.stdout
    assert len(document.encode()) < COMMENT_LIMIT
    assert "1 node group will be replaced" in document
    assert "changes: **1 stack disruptive**" in document
    # Inside the cluster's collapsed section: the address (escaped for markdown) flagged destructive.
    address = code(GPU_GROUP)
    row = next(line for line in document.splitlines() if address in line and line.startswith("| "))
    # Above the Terraform table, the stack's Disruption list gives the class and its reason.
    assert f"- disruptive: {address}: node group deleted: its nodes are drained" in document.splitlines()
    before_row = document[: document.index(row)]
    assert before_row.rfind("<details>") > before_row.rfind("</details>")  # collapsed
    assert f"<summary><code>{STACK}</code>" in before_row[before_row.rfind("<details>") :]
    assert row.startswith("| delete ⚠️ **destructive** |")
    assert "gpu-node-group-replacement" in document and "1 advisory" in document

    text = npa("preview", "--spec", str(spec))
    assert text.code == 0, text.stderr[-3000:]
    assert f"delete {GPU_GROUP} DESTRUCTIVE" in text.stdout
    assert "[disruptive: node group deleted: its nodes are drained]" in text.stdout

    # Another machine, e.g. a CI runner (no work dir): the plan starts from the Terraform state the bridge
    # keeps in the stack (a secret output), so it shows the same deletion, not every resource as new.
    shutil.rmtree(isolated_home / ".npa-pulumi" / "work" / STACK)
    elsewhere = npa("preview", "--spec", str(spec), "--output", "json")
    assert elsewhere.code == 0, elsewhere.stderr[-3000:]
    remote = {c["stack"]: c for c in elsewhere.json()["clusters"]}[STACK]
    # The same plan as on the machine that ran `up` (upstream's GPU Operator release comes back with the
    # pool's managed driver image gone, on both), not every resource as new.
    local = {key: cluster["terraform"][key] for key in ("add", "change", "destroy")}
    assert {key: remote["terraform"][key] for key in local} == local
    assert local["add"] <= 1
    assert [r["address"] for r in remote["terraform"]["resources"] if r["kind"] == "node_group"] == [
        GPU_GROUP
    ]
    assert not (
        isolated_home / ".npa-pulumi" / "work" / STACK / "k8s-training" / "terraform.tfstate"
    ).exists()

    # Issue 58: a pinned pool with no `version` holds where its node groups run. A plain `up` that moves the
    # cluster to 1.33 moves its control plane and CPU group; the pinned GPU group stays at the 1.32 the
    # cloud reports, and the run names the pool it held.
    pinned = SPEC.replace("PRESET}", "1gpu-24vcpu-218gb, pin: true}\n        k8s_version: '1.33'")
    write_spec(spec, pinned)
    held = npa(
        "up", "--spec", str(spec), "--only-clusters", "gpu", "--yes", "--no-health-gate", "--output", "json"
    )
    assert held.code == 0, held.stderr[-3000:]
    assert held.json()["warnings"][0].startswith(
        "project-existing1/gpu.gpu_nodes: pinned with no version: held at 1.32"
    )
    cluster_id = {s["stack"]: s for s in held.json()["stacks"]}[STACK]["cluster_id"]
    shown = inventory()
    (control,) = [c for c in shown["mk8s_clusters"] if c["id"] == cluster_id]
    groups = {g["platform"]: g["version"] for g in shown["node_groups"] if g["cluster_id"] == cluster_id}
    assert (control["k8s_version"], groups) == ("1.33", {"cpu-d3": "1.33", "gpu-rtx6000": "1.32"})


def test_the_replacement_policy_made_mandatory_stops_up_before_the_gpu_pool_is_removed(
    isolated_home: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC.replace("PRESET", "1gpu-24vcpu-218gb"))
    npa("local-cloud", "init", check=True)
    up = npa("up", "--spec", str(spec), "--yes", "--no-health-gate", "--output", "json")
    assert up.code == 0, up.stderr[-3000:]
    work = isolated_home / ".npa-pulumi" / "work" / STACK / "k8s-training"
    state_before = (work / "terraform.tfstate").read_bytes()
    groups_before = inventory()["node_groups"]

    write_spec(
        spec,
        SPEC.replace("gpu_nodes: {count: 1, platform: gpu-rtx6000, preset: PRESET}", "gpu_nodes: {count: 0}"),
    )
    levels = tmp_path / "levels.json"
    levels.write_text(json.dumps({"gpu-node-group-replacement": "mandatory"}))
    blocked = npa(
        "up",
        "--spec",
        str(spec),
        "--yes",
        "--no-health-gate",
        "--policy-config",
        str(levels),
        "--output",
        "json",
    )
    assert blocked.code != 0
    stacks = {s["stack"]: s for s in blocked.json()["stacks"]}
    assert stacks[STACK]["status"] == "failed"
    (violation,) = [v for v in stacks[STACK]["policy"] if v["policy"] == "gpu-node-group-replacement"]
    assert violation["level"] == "mandatory" and GPU_GROUP in violation["message"]
    # The CPU cluster replaces nothing: not blocked (it may re-run: the policy config is in its fingerprint).
    cpu = stacks["tfplan.project-existing1.cpu"]
    assert cpu["status"] in ("unchanged", "deployed") and not cpu["policy"]
    # Stopped before the module changed: the same Terraform state, the same node groups in the cloud.
    assert (work / "terraform.tfstate").read_bytes() == state_before
    assert inventory()["node_groups"] == groups_before

    # Outside its maintenance window (issue 58): `up` defers the cluster whose change is disruptive; its
    # stack is not updated and nothing in the cloud moves. The window opens in three days, for an hour.
    opens = (datetime.now(UTC) + timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
    day = opens.strftime("%a").lower()
    window = f"  maintenance:\n    windows: [{{days: [{day}], start: '00:00', duration: 1h}}]\n"
    outside = SPEC.replace(
        "gpu_nodes: {count: 1, platform: gpu-rtx6000, preset: PRESET}", "gpu_nodes: {count: 0}"
    ).replace("projects:\n", window + "projects:\n", 1)
    write_spec(spec, outside)
    # The preview says it first: what an `up` now would leave pending, and until when.
    previewed = npa("preview", "--spec", str(spec), "--output", "json")
    assert previewed.code == 0, previewed.stderr[-3000:]
    waits = {c["stack"]: c for c in previewed.json()["clusters"]}[STACK]["pending"]
    assert waits["next_window"] == opens.isoformat() and waits["changes"][0]["held_by"] == "outside-window"
    calls = tmp_path / "calls.log"  # the local cloud's operation log: one line per call
    deferred = npa(
        "up",
        "--spec",
        str(spec),
        "--yes",
        "--no-health-gate",
        "--output",
        "json",
        env={"NPA_LOCAL_CLOUD_CALL_LOG": str(calls)},
    )
    assert deferred.code == 0, deferred.stderr[-3000:]
    operations = calls.read_text().split() if calls.exists() else []
    writes = ("create", "delete", "edit", "resize", "set", "install", "uninstall", "merge")
    mutations = [op for op in operations if op.split("_", 1)[0] in writes]
    assert operations and not mutations, mutations  # read, but nothing disruptive (nor else) applied
    stacks = {s["stack"]: s for s in deferred.json()["stacks"]}
    assert stacks[STACK]["status"] == "pending"
    pending = stacks[STACK]["pending"]
    assert pending["inside_window"] is False and pending["next_window"] == opens.isoformat()
    assert [(c["resource"], c["held_by"]) for c in pending["changes"]] == [(GPU_GROUP, "outside-window")]
    # The CPU cluster's own change (the policy config left its fingerprint) is in-place: it may apply.
    assert stacks["tfplan.project-existing1.cpu"]["status"] in ("unchanged", "deployed")
    assert (work / "terraform.tfstate").read_bytes() == state_before
    assert inventory()["node_groups"] == groups_before
    text = npa("up", "--spec", str(spec), "--yes", "--no-health-gate")
    assert text.code == 0, text.stderr[-3000:]
    assert f"next window {opens.isoformat()}" in text.stdout
    assert f"pending {GPU_GROUP} [outside-window]: node group deleted" in text.stdout
    assert inventory()["node_groups"] == groups_before
    write_spec(
        spec,
        SPEC.replace("gpu_nodes: {count: 1, platform: gpu-rtx6000, preset: PRESET}", "gpu_nodes: {count: 0}"),
    )

    # Advisory (the default): the update goes ahead with the warning, and the GPU pool is gone.
    allowed = npa("up", "--spec", str(spec), "--yes", "--no-health-gate", "--output", "json")
    assert allowed.code == 0, allowed.stderr[-3000:]
    done = {s["stack"]: s for s in allowed.json()["stacks"]}[STACK]
    assert done["status"] == "deployed"
    assert [v["level"] for v in done["policy"] if v["policy"] == "gpu-node-group-replacement"] == ["advisory"]
    assert done["terraform"]["destroy"] >= 1
    assert [g["platform"] for g in inventory()["node_groups"] if g["cluster_id"] == done["cluster_id"]] == [
        "cpu-d3"
    ]
    again = npa("up", "--spec", str(spec), "--yes", "--no-health-gate", "--output", "json")
    assert again.code == 0 and {s["status"] for s in again.json()["stacks"]} == {"unchanged"}

    # `upgrade run` (issue 58) on the same deployment: both clusters run the service's default (1.32, read
    # from the cloud); the spec now declares 1.33. One hop each, the skew read back from the local cloud.
    write_spec(
        spec,
        SPEC.replace(
            "gpu_nodes: {count: 1, platform: gpu-rtx6000, preset: PRESET}", "gpu_nodes: {count: 0}"
        ).replace("projects:\n", '  k8s_version: "1.33"\nprojects:\n'),
    )
    upgraded = npa("upgrade", "run", "--spec", str(spec), "--yes", "--no-health-gate", "--output", "json")
    assert upgraded.code == 0, upgraded.stderr[-3000:] + upgraded.stdout[-3000:]
    document = upgraded.json()
    assert document["ok"] and not document["warnings"]
    assert {c["cluster"]: (c["from"], c["at"], c["state"]) for c in document["clusters"]} == {
        "project-existing1/gpu": ("1.32", "1.33", "reached"),
        "project-existing1/cpu": ("1.32", "1.33", "reached"),
    }
    (hop,) = document["hops"]
    assert hop["moved"] == {"project-existing1/gpu": "1.33", "project-existing1/cpu": "1.33"}
    # Two steps (the control planes with the node groups held at 1.32, then the node groups), each checking
    # each cluster's control plane and every node group (each has its CPU group: the GPU pool is gone).
    assert [step["step"] for step in hop["steps"]] == ["control-plane", "node-groups"]
    assert [step["invariant_checks"] for step in hop["steps"]] == [4, 4] and hop["skew_violations"] == []
    shown = inventory()
    live = {
        kind: [r for r in shown[kind] if r["state"] != "DELETING"]
        for kind in ("mk8s_clusters", "node_groups")
    }
    assert {c["k8s_version"] for c in live["mk8s_clusters"]} == {"1.33"}
    assert {g["version"] for g in live["node_groups"]} == {"1.33"} and len(live["node_groups"]) == 2
    settled = npa("up", "--spec", str(spec), "--yes", "--no-health-gate", "--output", "json")
    assert settled.code == 0 and {s["status"] for s in settled.json()["stacks"]} == {"unchanged"}
