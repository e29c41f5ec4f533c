"""The fleet engine end to end: real CLI processes, the real Pulumi engine, real terraform, the local cloud.

A fleet of two projects (one created by name, one existing by id) × two clusters, deployed with -j 2:
up, status, a second up that changes nothing, adding a cluster, destroying one cluster, and a full destroy
that leaves only what a fleet retains (the created project and the bucket)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import by_stack, inventory, npa, write_spec

from npa_pulumi.runtime.toolchain import find_pulumi

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: lifecycle
region: us-central1
project_prefix: "lc-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - name: alpha
    object_storage: {enabled: true, storage_class: standard, size_gibibytes: 16}
    clusters:
      - name: train
      - name: infer
  - project_id: project-existing1
    clusters:
      - name: one
      - name: two
        cpu_nodes: {count: 2}
"""

EXTRA_CLUSTER = """\
      - name: extra
"""


def _spec_with_extra(base: str) -> str:
    marker = "      - name: infer\n"
    return base.replace(marker, marker + EXTRA_CLUSTER)


def _up(spec: Path, *extra: str) -> dict[str, Any]:
    result = npa(
        "up", "--spec", str(spec), "--cloud", "local", "--yes", "-j", "2", "--output", "json", *extra
    )
    assert result.code == 0, result.stderr[-4000:] + result.stdout[-3000:]
    document: dict[str, Any] = result.json()
    return document


def _passphrase_salts(home: Path, stacks: Any) -> dict[str, str]:
    """Each stack's passphrase salt, from its checkpoint and its settings file (the two must agree)."""
    npa_home = home / ".npa-pulumi"
    salts = {}
    for stack in stacks:
        checkpoint = json.loads(
            (npa_home / "state" / ".pulumi" / "stacks" / "npa-fleet" / f"{stack}.json").read_text()
        )
        providers = checkpoint["checkpoint"]["latest"]["secrets_providers"]
        assert providers["type"] == "passphrase", (stack, providers)
        settings = (npa_home / "workspace" / f"Pulumi.{stack}.yaml").read_text()
        assert f"encryptionsalt: {providers['state']['salt']}" in settings, (stack, settings)
        salts[stack] = providers["state"]["salt"]
    return salts


def test_fleet_lifecycle(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)

    # ---- first up: two project stacks and four cluster stacks
    first = _up(spec)
    stacks = by_stack(first)
    assert set(stacks) == {
        "lifecycle.alpha",
        "lifecycle.project-existing1",
        "lifecycle.alpha.train",
        "lifecycle.alpha.infer",
        "lifecycle.project-existing1.one",
        "lifecycle.project-existing1.two",
    }
    assert {s["status"] for s in first["stacks"]} == {"deployed"}
    clusters = {c["stack"]: c for c in first["clusters"]}
    assert all(c["cluster_id"].startswith("mk8scluster-") for c in clusters.values())
    assert clusters["lifecycle.alpha.train"]["kube_context"] == "fleet-lifecycle-alpha-train"
    assert clusters["lifecycle.project-existing1.one"]["project_id"] == "project-existing1"

    cloud = inventory()
    created = [p for p in cloud["projects"] if p["name"] == "lc-alpha"]
    assert len(created) == 1
    alpha_id = created[0]["id"]
    assert clusters["lifecycle.alpha.train"]["project_id"] == alpha_id
    assert len(cloud["mk8s_clusters"]) == 4
    assert len(cloud["buckets"]) == 1
    # the existing project reuses its subnet; the created one got an owned network
    assert {s["project_id"] for s in cloud["subnets"]} >= {alpha_id, "project-existing1"}

    # ---- each cluster stack was made with its project stack's passphrase salt (one key derivation per
    # engine run, which opens both); each project stack has a salt of its own
    salts = _passphrase_salts(isolated_home, stacks)
    assert salts["lifecycle.alpha.train"] == salts["lifecycle.alpha.infer"] == salts["lifecycle.alpha"]
    assert salts["lifecycle.project-existing1.one"] == salts["lifecycle.project-existing1"]
    assert salts["lifecycle.project-existing1.two"] == salts["lifecycle.project-existing1"]
    assert salts["lifecycle.alpha"] != salts["lifecycle.project-existing1"]

    # ---- the engines wrote the file backend without gocloud's `.attrs` sidecars, which they rewrite in
    # place: a cluster stack reading its project stack during that write failed with "failed to load
    # checkpoint: EOF" (the refresh below, which refreshes both at once)
    state = isolated_home / ".npa-pulumi" / "state" / ".pulumi"
    assert {p.name for p in state.rglob("*.attrs")} == set()

    # ---- status: every cluster deployed, checked against the live cloud
    status = npa("status", "--spec", str(spec), "--cloud", "local", "--output", "json")
    assert status.code == 0, status.stderr[-3000:] + status.stdout[-3000:]
    assert {c["status"] for c in status.json()["clusters"]} == {"deployed"}

    # ---- refresh: every stack in sync with the cloud
    refreshed = npa("refresh", "--spec", str(spec), "--cloud", "local", "--output", "json")
    assert refreshed.code == 0, refreshed.stderr[-3000:] + refreshed.stdout[-3000:]
    assert {s["status"] for s in refreshed.json()["stacks"]} == {"in-sync"}

    # ---- without a terminal and without --yes, mutating commands refuse and change nothing
    refused = npa("destroy", "--spec", str(spec), "--cloud", "local", input_text="")
    assert refused.code == 1
    assert "refusing to destroy without --yes" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert len(inventory()["mk8s_clusters"]) == 4

    # ---- second up with the same spec changes nothing
    second = _up(spec)
    assert {s["status"] for s in second["stacks"]} == {"unchanged"}
    assert len(inventory()["mk8s_clusters"]) == 4

    # ---- add a cluster: only its new stack changes
    spec_plus = write_spec(tmp_path / "fleet-plus.yaml", _spec_with_extra(SPEC))
    third = _up(spec_plus)
    third_stacks = by_stack(third)
    assert third_stacks["lifecycle.alpha.extra"]["status"] == "deployed"
    changed = {name for name, s in third_stacks.items() if s["status"] != "unchanged"}
    assert changed == {"lifecycle.alpha.extra"}
    assert len(inventory()["mk8s_clusters"]) == 5
    # made by a later command than its project stack: the same salt
    assert (
        _passphrase_salts(isolated_home, ["lifecycle.alpha.extra"])["lifecycle.alpha.extra"]
        == salts["lifecycle.alpha"]
    )

    # ---- destroy just that cluster
    gone = npa(
        "destroy",
        "--spec",
        str(spec_plus),
        "--cloud",
        "local",
        "--only-clusters",
        "extra",
        "--yes",
        "--output",
        "json",
    )
    assert gone.code == 0, gone.stderr[-3000:] + gone.stdout[-3000:]
    gone_stacks = by_stack(gone.json())
    assert gone_stacks["lifecycle.alpha.extra"]["status"] == "destroyed"
    assert "lifecycle.alpha" not in gone_stacks  # the project still has clusters: its stack stays
    assert len(inventory()["mk8s_clusters"]) == 4
    # the destroyed stack is removed by its destroy's own engine run (`destroy --remove`): checkpoint,
    # history and its settings file (with its encryption salt) gone; a kept stack keeps them
    npa_home = isolated_home / ".npa-pulumi"
    state = npa_home / "state" / ".pulumi"
    for stack, kept in (("lifecycle.alpha.extra", False), ("lifecycle.alpha.train", True)):
        assert (state / "stacks" / "npa-fleet" / f"{stack}.json").exists() is kept, stack
        history = state / "history" / "npa-fleet" / stack
        assert any(f.is_file() for f in history.glob("*")) is kept, stack
        assert (npa_home / "workspace" / f"Pulumi.{stack}.yaml").exists() is kept, stack

    # ---- pulumi stack ls (the plain CLI, in the repository) lists the fleet's stacks
    # Pulumi expands the `~` of Pulumi.yaml's backend with the account's home, not $HOME; point the plain
    # CLI at the same default backend the tool used inside this test's private HOME.
    backend = f"file://{isolated_home / '.npa-pulumi' / 'state'}"
    env = {**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_BACKEND_URL": backend}
    listing = subprocess.run(
        [
            str(find_pulumi()),
            "stack",
            "ls",
            "--json",
            "--project",
            "npa-fleet",
            "--tag",
            "npa:fleet=lifecycle",
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
    )
    assert listing.returncode == 0, listing.stderr
    names = {s["name"] for s in json.loads(listing.stdout)}
    assert names == {
        "lifecycle.alpha",
        "lifecycle.project-existing1",
        "lifecycle.alpha.train",
        "lifecycle.alpha.infer",
        "lifecycle.project-existing1.one",
        "lifecycle.project-existing1.two",
    }

    # ---- npa-pulumi stacks lists them from anywhere
    listed = npa("stacks", "--fleet", "lifecycle", "--output", "json")
    assert listed.code == 0, listed.stderr[-2000:]
    assert {s["name"] for s in listed.json()["stacks"]} == names

    # ---- full destroy: only the retained project and bucket remain of what the fleet created
    final = npa("destroy", "--spec", str(spec), "--cloud", "local", "--yes", "--output", "json")
    assert final.code == 0, final.stderr[-3000:] + final.stdout[-3000:]
    assert {s["status"] for s in final.json()["stacks"]} == {"destroyed"}
    cloud = inventory()
    assert cloud["mk8s_clusters"] == []
    assert cloud["node_groups"] == []
    assert [p["id"] for p in cloud["projects"] if p["name"] == "lc-alpha"] == [alpha_id]
    assert len(cloud["buckets"]) == 1
    assert [n for n in cloud["networks"] if n["project_id"] == alpha_id] == []
    assert [s for s in cloud["subnets"] if s["project_id"] == alpha_id] == []
    # the existing project's own subnet was reused, never owned: still there
    assert [s for s in cloud["subnets"] if s["project_id"] == "project-existing1"]
