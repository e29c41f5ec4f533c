"""A fleet on the local cloud through the default recipe, as a user's runs (issue 56): upstream k8s-training
(the real module beside the checkout) with the fleet's override files, applied by terraform against the local
cloud's providers, with a real Kubernetes API server behind the cluster. The cluster stack's Terraform state
holds upstream's own resources; the nodes carry the node-group id the state's node group has; status,
preview and destroy work on it as on any other; and a cluster of the same name made by someone else in the
project is refused as Nebius refuses it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import inventory, npa, write_spec

from npa_pulumi.kube.client import KubeClient

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: upj
region: us-central1
projects:
  - project_id: project-existing1
    clusters:
      - name: c1
        cpu_nodes: {count: 2, platform: cpu-d3, preset: 4vcpu-16gb}
"""
STACK = "upj.project-existing1.c1"


def _state(home: Path) -> dict[str, Any]:
    path = home / ".npa-pulumi" / "work" / STACK / "k8s-training" / "terraform.tfstate"
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_a_cluster_through_upstream_k8s_training_lives_and_dies_like_any_other(
    kube_api: Path, upstream_recipe: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)
    up = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert up.code == 0, up.stderr[-4000:]
    [cluster] = [s for s in up.json()["stacks"] if s["stack"] == STACK]
    assert cluster["status"] == "deployed"

    state = _state(kube_api)
    resources = {f"{r['type']}.{r['name']}": r for r in state["resources"]}
    assert "nebius_mk8s_v1_cluster.k8s-cluster" in resources
    node_group = resources["nebius_mk8s_v1_node_group.cpu-only"]
    group_id = node_group["instances"][0]["attributes"]["id"]
    cluster_id = resources["nebius_mk8s_v1_cluster.k8s-cluster"]["instances"][0]["attributes"]["id"]
    assert cluster["cluster_id"] == cluster_id
    assert not any(r.startswith("terraform_data.") for r in resources)  # no stand-in resource at all

    kubeconfig = kube_api / ".npa-pulumi" / "kubeconfigs" / "fleet-upj-project-existing1-c1.yaml"
    nodes = KubeClient.from_kubeconfig(kubeconfig.read_text()).get("/api/v1/nodes")["items"]
    assert len(nodes) == 2
    assert {n["metadata"]["labels"]["nebius.com/node-group-id"] for n in nodes} == {group_id}

    status = npa("status", "--spec", str(spec), "--output", "json")
    assert status.code == 0, status.stderr[-3000:]
    assert {s["stack"]: s["status"] for s in status.json()["stacks"]}[STACK] == "deployed"
    preview = npa("preview", "--spec", str(spec), "--output", "json")
    assert preview.code == 0, preview.stderr[-3000:]
    assert {s["stack"]: s["status"] for s in preview.json()["stacks"]}[STACK] == "no-changes"

    destroy = npa("destroy", "--spec", str(spec), "--yes", "--output", "json")
    assert destroy.code == 0, destroy.stderr[-3000:]
    assert not inventory()["mk8s_clusters"]


def test_a_cluster_name_someone_else_holds_in_the_project_is_refused_as_on_nebius(
    isolated_home: Path, upstream_recipe: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)
    [subnet] = [s for s in inventory()["subnets"] if s["project_id"] == "project-existing1"][:1]
    made = npa(
        "local-cloud",
        "api",
        "create_cluster",
        "--args",
        json.dumps({"project_id": "project-existing1", "name": "c1", "subnet_id": subnet["id"]}),
        check=True,
    )
    theirs = json.loads(made.stdout)["result"]["id"]
    up = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert up.code == 1, up.stdout[-2000:] + up.stderr[-3000:]
    assert "already" in (up.stdout + up.stderr).lower()
    clusters = inventory()["mk8s_clusters"]
    assert [c["id"] for c in clusters] == [theirs]  # no second cluster, theirs untouched
