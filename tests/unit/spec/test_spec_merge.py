"""Merge and resolution semantics (reference §2.5, §3.1) and where problems with merged values point."""

from __future__ import annotations

import textwrap

import pytest

from npa_pulumi.spec import FleetSpec, SpecError, SpecProblem, parse_spec
from npa_pulumi.spec.parse import merge_tracked

HEAD = """\
apiVersion: npa.fleet/v0.0.1
name: demo
region: eu-north1
"""


def parse(body: str, head: str = HEAD) -> FleetSpec:
    """Parse HEAD (3 lines) followed by the dedented body, whose first line is line 4."""
    return parse_spec(head + textwrap.dedent(body).lstrip("\n"), "fleet.yaml")


def problems(body: str) -> list[SpecProblem]:
    with pytest.raises(SpecError) as caught:
        parse(body)
    return caught.value.problems


def test_pools_merge_key_by_key() -> None:
    spec = parse("""
    defaults:
      cpu_nodes: {count: 1, platform: cpu-e2, preset: 4vcpu-16gb, disk_size_gib: 200}
    projects:
      - name: a
        clusters:
          - cpu_nodes: {count: 3}
    """)
    pool = spec.projects[0].clusters[0].cpu_nodes
    assert pool is not None
    assert (pool.count, pool.platform, pool.preset, pool.disk_size_gib) == (3, "cpu-e2", "4vcpu-16gb", 200)


def test_pool_platform_defaults_by_kind() -> None:
    spec = parse("""
    projects:
      - name: a
        clusters:
          - {cpu_nodes: {count: 0}, gpu_nodes: {count: 1, preset: 1gpu-24vcpu-218gb}}
    """)
    cluster = spec.projects[0].clusters[0]
    assert cluster.cpu_nodes is not None and cluster.cpu_nodes.platform == "cpu-d3"
    assert cluster.cpu_nodes.preset == ""  # unset; a pool with nodes must name one (the original refuses)
    assert cluster.gpu_nodes is not None and cluster.gpu_nodes.platform == "gpu-rtx6000"


def test_mig_is_replaced_whole() -> None:
    spec = parse("""
    defaults:
      gpu_nodes: {count: 2, platform: gpu-rtx6000, preset: 1gpu-24vcpu-218gb, capacity_block_group: cbg-x}
      mig: {enabled: true, strategy: mixed, config: all-balanced}
    projects:
      - name: a
        clusters:
          - name: whole
          - name: disabled
            mig: {enabled: false}
    """)
    whole, off = spec.projects[0].clusters
    assert whole.mig is not None and whole.mig.enabled and whole.mig.strategy == "mixed"
    assert off.mig is not None and not off.mig.enabled
    assert (off.mig.strategy, off.mig.config) == ("none", "")  # not inherited from the enabled default


def test_kuberay_is_replaced_whole() -> None:
    spec = parse("""
    defaults:
      cpu_nodes: {count: 1, platform: cpu-d3, preset: 16vcpu-64gb}
      kuberay: {enabled: true, worker_replicas: 2}
    projects:
      - name: a
        clusters:
          - name: ray
          - name: plain
            kuberay: {enabled: false}
    """)
    ray, plain = spec.projects[0].clusters
    assert ray.kuberay is not None and ray.kuberay.worker_replicas == 2
    assert plain.kuberay is not None and not plain.kuberay.enabled and plain.kuberay.worker_replicas == 1


def test_null_removes_an_inherited_pool() -> None:
    spec = parse("""
    defaults:
      cpu_nodes: {count: 1, preset: 16vcpu-64gb}
      gpu_nodes: {count: 1, preset: 1gpu-24vcpu-218gb}
    projects:
      - name: a
        clusters:
          - gpu_nodes: null
    """)
    assert spec.projects[0].clusters[0].gpu_nodes is None


def test_package_repositories_merge_by_file() -> None:
    spec = parse("""
    defaults:
      gpu_workload_profile: rtx-rendering
      gpu_driver_package_repositories: {a.list: "deb a", b.list: "deb b"}
    projects:
      - name: p
        clusters:
          - gpu_driver_package_repositories: {b.list: "deb B", c.list: "deb c"}
    """)
    repos = spec.projects[0].clusters[0].gpu_driver_package_repositories
    assert repos == {"a.list": "deb a", "b.list": "deb B", "c.list": "deb c"}


def test_identical_custom_and_mixed_projects() -> None:
    spec = parse("""
    defaults:
      cpu_nodes: {count: 1, preset: 16vcpu-64gb}
    projects:
      - name: identical
      - name: custom
        clusters:
          - name: train
            cpu_nodes: {count: 4}
          - {}
          - ~
      - project_id: project-e00example
        clusters: [{}]
    """)
    identical, custom, by_id = spec.projects
    assert [c.name for c in identical.clusters] == ["cluster"]
    assert [c.name for c in custom.clusters] == ["train", "cluster-1", "cluster-2"]
    assert [c.cpu_count() for c in custom.clusters] == [4, 1, 1]
    assert [c.name for c in by_id.clusters] == ["cluster"]
    assert by_id.key() == "project-e00example"


def test_cluster_names_are_slugged() -> None:
    spec = parse("""
    defaults:
      cpu_nodes: {count: 1, preset: 4vcpu-16gb}
    projects:
      - name: a
        clusters:
          - name: " Train_Big "
          - name: "__"
    """)
    assert [c.name for c in spec.projects[0].clusters] == ["train-big", "cluster"]


def test_fleet_name_is_slugged_but_project_name_is_not() -> None:
    spec = parse(
        head="",
        body="""
    name: My Fleet
    project_prefix: My-
    defaults: {cpu_nodes: {count: 1, preset: 4vcpu-16gb}}
    projects:
      - name: Team_A
    """,
    )
    assert spec.name == "my-fleet"
    project = spec.projects[0]
    assert project.name == "Team_A"
    assert project.key() == "team-a"
    assert project.display_name(spec.project_prefix) == "My-Team_A"


def test_prefix_is_never_doubled() -> None:
    spec = parse(
        head="",
        body="""
    name: f
    project_prefix: "team-"
    defaults: {cpu_nodes: {count: 1, preset: 4vcpu-16gb}}
    projects:
      - name: team-a
      - name: b
      - project_id: project-x
    """,
    )
    names = [p.display_name(spec.project_prefix) for p in spec.projects]
    assert names == ["team-a", "team-b", "project-x"]


def test_envelope_takes_defaults_mk8s_else_flat_defaults() -> None:
    spec = parse("""
    defaults:
      cpu_nodes: {count: 1, preset: flat-16vcpu-64gb}
      mk8s:
        cpu_nodes: {count: 2, preset: envelope-16vcpu-64gb}
    projects:
      - name: a
        clusters:
          - name: legacy
          - name: explicit
            backend: mk8s
            mk8s: {cpu_nodes: {count: 5}}
    """)
    legacy, explicit = spec.projects[0].clusters
    assert legacy.cpu_nodes is not None and legacy.cpu_nodes.preset == "flat-16vcpu-64gb"
    assert explicit.cpu_nodes is not None
    assert (explicit.cpu_nodes.count, explicit.cpu_nodes.preset) == (5, "envelope-16vcpu-64gb")
    assert not legacy.backend_explicit and explicit.backend_explicit


def test_envelope_without_defaults_mk8s_uses_flat_defaults() -> None:
    spec = parse("""
    defaults:
      cpu_nodes: {count: 1, preset: 16vcpu-64gb}
    projects:
      - name: a
        clusters:
          - mk8s: {enable_filestore: true}
    """)
    cluster = spec.projects[0].clusters[0]
    assert cluster.cpu_count() == 1 and cluster.enable_filestore


def test_outer_name_wins_over_envelope_name() -> None:
    spec = parse("""
    projects:
      - name: a
        clusters:
          - name: outer
            mk8s: {name: inner, cpu_nodes: {count: 1, preset: 4vcpu-16gb}}
          - mk8s: {name: inner-only, cpu_nodes: {count: 1, preset: 4vcpu-16gb}}
    """)
    assert [c.name for c in spec.projects[0].clusters] == ["outer", "inner-only"]


def test_backend_comes_from_defaults() -> None:
    spec = parse("""
    defaults:
      backend: Soperator
      soperator:
        jail_size_gib: 1024
        control_plane: {system: {min_size: 4}}
    projects:
      - name: a
        clusters:
          - name: slurm
            soperator:
              control_plane: {login: {preset: 32vcpu-128gb}}
              workers: [{name: cpu, size: 2}]
    """)
    cluster = spec.projects[0].clusters[0]
    assert cluster.backend == "soperator"
    assert cluster.soperator is not None
    assert cluster.soperator.jail_size_gib == 1024
    assert cluster.soperator.control_plane.system.min_size == 4  # deep-merged
    assert cluster.soperator.control_plane.login.preset == "32vcpu-128gb"


def test_soperator_worker_lists_replace_defaults() -> None:
    spec = parse("""
    defaults:
      soperator:
        workers: [{name: a}, {name: b}]
    projects:
      - name: p
        clusters:
          - {name: s, backend: soperator, soperator: {workers: [{name: c}]}}
    """)
    payload = spec.projects[0].clusters[0].soperator
    assert payload is not None and [w.name for w in payload.workers] == ["c"]


def test_legacy_clusters_ignore_backend_keys_of_defaults() -> None:
    spec = parse("""
    defaults:
      cpu_nodes: {count: 1, preset: 4vcpu-16gb}
      soperator: {jail_size_gib: 1024}
      mk8s: {cpu_nodes: {count: 7}}
    projects:
      - name: a
    """)
    cluster = spec.projects[0].clusters[0]
    assert cluster.backend == "mk8s" and cluster.soperator is None and cluster.cpu_count() == 1


def test_merge_tracked_records_sources() -> None:
    merged, origins = merge_tracked(
        {"gpu_nodes": {"count": 1, "preset": "p"}, "mig": {"enabled": True, "strategy": "mixed"}},
        ("defaults",),
        {"gpu_nodes": {"count": 2}, "mig": {"enabled": False}},
        ("projects", 0, "clusters", 0),
    )
    assert merged == {"gpu_nodes": {"count": 2, "preset": "p"}, "mig": {"enabled": False}}
    assert origins[("gpu_nodes", "count")] == ("projects", 0, "clusters", 0, "gpu_nodes", "count")
    assert origins[("gpu_nodes", "preset")] == ("defaults", "gpu_nodes", "preset")
    assert origins[("mig",)] == ("projects", 0, "clusters", 0, "mig")
    assert ("mig", "strategy") not in origins


# --- where problems with merged values point ------------------------------------------------------------


def test_inherited_problem_points_at_the_defaults_line() -> None:
    found = problems("""
    defaults:
      gpu_nodes:
        count: 1
        preset: banana
    projects:
      - name: a
      - name: b
    """)
    [problem] = found  # reported once, although both projects inherit it
    assert problem.path == "projects[0].clusters[0].gpu_nodes.preset"
    assert (problem.line, problem.column) == (7, 5)
    assert "inherited from defaults.gpu_nodes.preset" in problem.message


def test_own_value_problem_points_at_the_cluster_line() -> None:
    found = problems("""
    defaults:
      gpu_nodes: {count: 1, preset: 1gpu-24vcpu-218gb}
    projects:
      - name: a
        clusters:
          - name: x
            gpu_nodes:
              preset: banana
    """)
    [problem] = found
    assert problem.path == "projects[0].clusters[0].gpu_nodes.preset"
    assert (problem.line, problem.column) == (11, 11)
    assert "inherited" not in problem.message


def test_envelope_problem_path_includes_the_envelope() -> None:
    found = problems("""
    projects:
      - name: a
        clusters:
          - backend: mk8s
            mk8s:
              gpu_nodes: {count: 1, preset: banana}
    """)
    [problem] = found
    assert problem.path == "projects[0].clusters[0].mk8s.gpu_nodes.preset"
    assert problem.line == 9


def test_absent_value_problem_points_at_the_nearest_written_node() -> None:
    found = problems("""
    projects:
      - name: a
        clusters:
          - name: empty
    """)
    [problem] = found
    assert problem.path == "projects[0].clusters[0]"
    assert (problem.line, problem.column) == (7, 9)


def test_implicit_cluster_problem_points_at_the_project() -> None:
    found = problems("""
    projects:
      - name: lonely
    """)
    [problem] = found
    assert problem.path == "projects[0].clusters[0]"
    assert (problem.line, problem.column) == (5, 5)


def test_unknown_key_in_defaults_is_reported_once_and_other_problems_still_found() -> None:
    found = problems("""
    defaults:
      cpu_nodes: {count: 1, preset: 4vcpu-16gb}
      gpu_nodse: {count: 1}
    projects:
      - name: a
        clusters:
          - filestore_mount_path: relative
            enable_filestore: true
      - name: b
    """)
    assert [(p.path, p.line) for p in found] == [
        ("defaults.gpu_nodse", 6),
        ("projects[0].clusters[0].filestore_mount_path", 10),
    ]
    assert found[0].hint == "did you mean 'gpu_nodes'?"


def test_problems_are_in_document_order() -> None:
    found = problems("""
    projects:
      - name: a
        clusters:
          - {cpu_nodes: {count: -1}, gpu_health_timeout_minutes: 0}
      - name: "!"
    """)
    lines = [p.line or 0 for p in found]
    assert lines == sorted(lines) and len(found) >= 3


def test_unquoted_yaml_11_boolean_as_a_name_is_explained() -> None:
    [problem] = problems("""
    projects:
      - name: a
        clusters:
          - name: off
            cpu_nodes: {count: 1, preset: 4vcpu-16gb}
    """)
    assert problem.path == "projects[0].clusters[0].name"
    assert "quote" in problem.message
