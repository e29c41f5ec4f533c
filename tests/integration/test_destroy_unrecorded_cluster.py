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
