"""A cluster present in the cloud without recoverable state (no cluster stack records it) fails `destroy`
closed, named, with exit 2, and is left as it is (issue 57 item 5); a cluster that is really not there is
`absent` (exit 0). The local cloud stands in for Nebius; no Kubernetes API is needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import inventory, npa, write_spec

pytestmark = pytest.mark.integration

NO_KUBE = {"NPA_LOCAL_CLOUD_KUBERNETES_API": "0"}
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: ghosts
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
    clusters:
      - name: ghost
"""


def _cluster_made_elsewhere(name: str) -> str:
    """A cluster someone else created in the project (say `npa fleet`, whose state is not here)."""
    from npa_pulumi.cloud.factory import make_cloud
    from npa_pulumi.simulator import LocalCloud

    cloud = make_cloud("local")
    assert isinstance(cloud, LocalCloud)  # the local cloud creates clusters directly; the port does not
    [subnet] = cloud.list_subnets("project-existing1")
    return str(cloud.create_cluster("project-existing1", name, subnet.id).id)


def test_a_present_cluster_without_state_fails_closed(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "0")
    npa("local-cloud", "init", env=NO_KUBE, check=True)
    cluster_id = _cluster_made_elsewhere("ghost")
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    before = inventory(env=NO_KUBE)

    result = npa("destroy", "--spec", str(spec), "--yes", "--output", "json", env=NO_KUBE)
    assert result.code == 2, result.stderr[-3000:]
    [phase] = [p for p in result.json()["phases"] if p["phase"] == "cluster"]
    assert phase["status"] == "refused"
    assert cluster_id in phase["reason"] and "no recoverable state" in phase["reason"]
    assert inventory(env=NO_KUBE)["mk8s_clusters"] == before["mk8s_clusters"]  # nothing deleted


def test_the_plan_tells_a_present_cluster_from_an_absent_one(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "0")
    npa("local-cloud", "init", env=NO_KUBE, check=True)
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)

    def cluster_phase() -> dict[str, str]:
        result = npa("destroy", "--spec", str(spec), "--dry-run", "--output", "json", env=NO_KUBE)
        assert result.code == 0, result.stderr[-3000:]
        [phase] = [p for p in result.json()["phases"] if p["phase"] == "cluster"]
        return {str(k): str(v) for k, v in phase.items()}

    assert cluster_phase()["status"] == "absent"  # really not there
    _cluster_made_elsewhere("ghost-other-name")
    assert cluster_phase()["status"] == "absent"  # another name is not this cluster
    cluster_id = _cluster_made_elsewhere("ghost")
    phase = cluster_phase()
    assert phase["status"] == "refused" and cluster_id in phase["reason"]


def test_exact_ids_take_a_present_cluster_without_state(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "0")
    npa("local-cloud", "init", env=NO_KUBE, check=True)
    cluster_id = _cluster_made_elsewhere("ghost")
    other_id = _cluster_made_elsewhere("not-ghost")
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    select = ["--only-projects", "project-existing1", "--only-clusters", "ghost"]

    def destroy(*flags: str) -> tuple[int, dict[str, str]]:
        result = npa("destroy", "--spec", str(spec), *select, *flags, "--output", "json", env=NO_KUBE)
        assert "phases" in result.json(), (result.stdout[-1500:], result.stderr[-1500:])
        [phase] = [p for p in result.json()["phases"] if p["phase"] == "cluster"]
        return result.code, {str(k): str(v) for k, v in phase.items()}

    def proof(project_id: str, cluster: str) -> list[str]:
        return ["--project-id", project_id, "--cluster-id", cluster]

    # The id of another cluster (of another name) is not this cluster's; nor is the right id in another
    # project: refused, named.
    code, phase = destroy(*proof("project-existing1", other_id), "--dry-run")
    assert phase["status"] == "refused" and "is named 'not-ghost'" in phase["reason"]
    code, phase = destroy(*proof("project-other", cluster_id), "--dry-run")
    assert phase["status"] == "refused" and "not project-other" in phase["reason"]
    # An id the cloud does not have: provider-verified absence.
    code, phase = destroy(*proof("project-existing1", "mk8scluster-e00nosuchcluster"), "--dry-run")
    assert phase["status"] == "absent"
    # The exact ids: planned, then deleted by id; the other cluster is untouched.
    code, phase = destroy(*proof("project-existing1", cluster_id), "--dry-run")
    assert phase["status"] == "planned" and cluster_id in phase["deletes"]
    code, phase = destroy(*proof("project-existing1", cluster_id), "--yes")
    assert (code, phase["status"]) == (0, "done"), phase
    left = {c["id"] for c in inventory(env=NO_KUBE)["mk8s_clusters"]}
    assert cluster_id not in left and other_id in left


def test_exact_ids_need_exactly_one_selected_cluster(isolated_home: Path, tmp_path: Path) -> None:
    npa("local-cloud", "init", env=NO_KUBE, check=True)
    spec = write_spec(tmp_path / "fleet.yaml", SPEC + "      - name: second\n")
    result = npa(
        "destroy", "--spec", str(spec), "--project-id", "p", "--cluster-id", "c", "--dry-run", env=NO_KUBE
    )
    assert result.code == 2 and "--only-clusters" in result.stderr
    half = npa("destroy", "--spec", str(spec), "--cluster-id", "c", "--dry-run", env=NO_KUBE)
    assert half.code == 2 and "go together" in half.stderr
