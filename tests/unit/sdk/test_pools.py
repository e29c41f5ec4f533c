"""A pinned pool with no `version` holds where its node groups run (sdk/pools.py): the clusters `up` and
`preview` read the cloud for, and the spec they render after the read."""

from __future__ import annotations

from npa_pulumi.sdk.pools import LiveVersions, held_in_place, unversioned_pins
from npa_pulumi.spec import FleetSpec, parse_spec

CPU = "{count: 2, platform: cpu-d3, preset: 16vcpu-64gb}"
GPU = "{count: 1, platform: gpu-l40s-d, preset: 1gpu-16vcpu-96gb"


def fleet(*clusters: str) -> FleetSpec:
    lines = ["apiVersion: npa.fleet/v0.0.1", "name: pins", "region: eu-north1", "projects:", "  - name: p"]
    lines += ["    clusters:"] + [f"      - {c}" for c in clusters]
    return parse_spec("\n".join(lines) + "\n")


SPEC = fleet(
    f"{{name: a, k8s_version: '1.33', cpu_nodes: {CPU}, gpu_nodes: {GPU}, pin: true}}}}",
    f"{{name: b, k8s_version: '1.33', cpu_nodes: {CPU}, gpu_nodes: {GPU}, pin: true, version: '1.32'}}}}",
    f"{{name: c, k8s_version: '1.33', cpu_nodes: {CPU}}}",
)


def test_only_a_pin_without_a_version_asks_for_a_read() -> None:
    keys = [f"{p.key()}/{c.name}" for p, c in SPEC.cluster_targets()]
    assert unversioned_pins(SPEC, keys) == [keys[0]]
    assert unversioned_pins(SPEC, keys[1:]) == []  # not selected: not read


def test_the_pool_holds_the_oldest_version_its_groups_report_and_the_rest_is_untouched() -> None:
    key = f"{SPEC.projects[0].key()}/a"
    live = {key: LiveVersions("1.32", {"a-ng-cpu": "1.32.4", "a-ng-gpu-0": "1.31.2", "a-ng-gpu-1": "1.32.1"})}
    spec, held = held_in_place(SPEC, live)
    assert held == {f"{key}.gpu_nodes": "1.31"}
    cluster = spec.projects[0].clusters[0]
    assert cluster.gpu_nodes is not None and (cluster.gpu_nodes.pin, cluster.gpu_nodes.version) == (
        True,
        "1.31",
    )
    assert cluster.cpu_nodes is not None and cluster.cpu_nodes.version == ""  # unpinned: follows the cluster
    assert cluster.k8s_version == "1.33"
    # The spec given is not changed, and a pool with its own version keeps it.
    original = SPEC.projects[0].clusters[0].gpu_nodes
    assert original is not None and original.version == ""
    assert spec.projects[0].clusters[1] == SPEC.projects[0].clusters[1]


def test_a_cluster_the_cloud_reports_no_group_of_starts_at_its_k8s_version() -> None:
    key = f"{SPEC.projects[0].key()}/a"
    for live in (
        {},
        {key: LiveVersions("1.32", {"a-ng-cpu": "1.32"})},
        {key: LiveVersions("1.32", {"a-ng-gpu-0": ""})},
    ):
        spec, held = held_in_place(SPEC, live)
        assert held == {}
        assert spec == SPEC
