"""The SDK drives the same engine as the CLI: deploy, status, destroy of a one-cluster fleet built in
Python."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_pulumi.sdk.fleet import (
    ClusterSpec,
    DestroyRequest,
    FleetSpec,
    NodePoolSpec,
    ProjectSpec,
    StatusRequest,
    TeardownOptions,
    UpRequest,
    Where,
    deploy,
    destroy,
    status,
)

pytestmark = pytest.mark.integration

LOCAL = Where(cloud="local")


def test_sdk_deploy_status_destroy(isolated_home: Path) -> None:
    spec = FleetSpec(
        name="sdk",
        region="us-central1",
        projects=[
            ProjectSpec(
                project_id="project-existing1",
                clusters=[ClusterSpec(name="one", cpu_nodes=NodePoolSpec(count=1, preset="4vcpu-16gb"))],
            )
        ],
    )
    deployed = deploy(spec, UpRequest(where=LOCAL))
    assert deployed.failed_count == 0, deployed.to_json()
    [cluster] = deployed.clusters()
    assert cluster.stack == "sdk.project-existing1.one"
    assert cluster.status == "deployed"
    assert cluster.cluster_id and cluster.cluster_id.startswith("mk8scluster-")

    assert [c.status for c in status(spec, StatusRequest(where=LOCAL)).clusters()] == ["deployed"]

    planned = destroy(
        spec, DestroyRequest(where=LOCAL, dry_run=True, teardown=TeardownOptions(delete_projects=True))
    )
    assert planned.dry_run and planned.stacks == []
    assert [(p.name, p.status) for p in planned.phases] == [
        ("cluster:sdk.project-existing1.one", "planned"),
        ("network:sdk.project-existing1", "retained"),  # a reused subnet
        ("project:sdk.project-existing1", "retained"),  # not created by the fleet
    ]
    assert [c.status for c in status(spec, StatusRequest(where=LOCAL)).clusters()] == ["deployed"]

    destroyed = destroy(spec, DestroyRequest(where=LOCAL))
    assert {s.status for s in destroyed.stacks} == {"destroyed"}
    assert destroyed.receipt and {p.status for p in destroyed.phases if p.phase == "cluster"} == {"done"}
    assert [c.status for c in status(spec, StatusRequest(where=LOCAL)).clusters()] == ["absent"]
