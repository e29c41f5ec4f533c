"""The shipped example specs validate, plan, render, match the schema, and hold no real ids."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from npa_pulumi.plan import plan_document, render_tfvars, resolve_targets
from npa_pulumi.spec import fleet_json_schema, load_spec

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
# Every fleet spec under examples/ (the local-tenant files are tenant fixtures of the local cloud, not specs),
# so an example added later is planned too.
FLEET_EXAMPLES = sorted(
    path.name for path in EXAMPLES.glob("*.yaml") if "apiVersion: npa.fleet/" in path.read_text()
)


def test_every_fleet_example_is_covered() -> None:
    assert {"fleet1-test.yaml", "mixed-backends.yaml", "mixed-local.yaml", "rtxpro-mig.yaml"} <= set(
        FLEET_EXAMPLES
    )


@pytest.mark.parametrize("name", FLEET_EXAMPLES)
def test_example_validates_plans_and_renders(name: str) -> None:
    spec = load_spec(EXAMPLES / name)
    targets = resolve_targets(spec)
    assert targets
    document = plan_document(spec, targets)
    assert document["cluster_count"] == len(targets)
    for target in targets:
        # The renderer's whole surface (the default recipe's own: test_tfvars_recipe.py).
        if target.backend == "mk8s":
            assert render_tfvars(target).file_vars["cluster_name"] == target.cluster_name


@pytest.mark.parametrize("name", FLEET_EXAMPLES)
def test_example_matches_the_json_schema(name: str) -> None:
    data = YAML(typ="safe").load(EXAMPLES / name)
    jsonschema.Draft202012Validator(fleet_json_schema()).validate(data)


@pytest.mark.parametrize("name", FLEET_EXAMPLES)
def test_example_holds_no_real_ids(name: str) -> None:
    text = (EXAMPLES / name).read_text()
    # Nebius ids look like <kind>-e00<alnum>; examples carry placeholders or nothing.
    assert not re.search(r"\b[a-z]+-e0[0-9][a-z0-9]{6,}\b", text)
    for line in text.splitlines():
        if re.match(r"\s*(tenant_id|project_id):", line):
            assert re.match(r'\s*\w+:\s*(""|\S*REPLACE\S*)', line), line
        if "capacity_block_group:" in line:
            assert re.search(r'capacity_block_group:\s*(""|\S*REPLACE_AT_RUNTIME)', line), line


def test_fleet1_test_is_the_seed_example() -> None:
    spec = load_spec(EXAMPLES / "fleet1-test.yaml")
    document = plan_document(spec, resolve_targets(spec))
    assert [p["display_name"] for p in document["projects"]] == ["fleet1-test-a", "fleet1-test-b"]
    a = document["projects"][0]
    assert a["object_storage"] == {
        "enabled": True,
        "storage_class": "enhanced",
        "size_gibibytes": 1024,
        "bucket_name": None,
    }
    cluster = a["clusters"][0]
    assert (cluster["name"], cluster["gpu_driver_mode"], cluster["managed_driver_preset"]) == (
        "cluster",
        "managed-image",
        "cuda13.0",
    )
    assert (cluster["enable_gpu_cluster"], cluster["gpu_reservation"]) == (False, "on-demand")
    assert (cluster["filestore_mount_tag"], cluster["filestore_disk_size_gibibytes"]) == (
        "data",
        1024,
    )


def test_rtxpro_mig_is_the_tested_tuple() -> None:
    [target] = resolve_targets(load_spec(EXAMPLES / "rtxpro-mig.yaml"))
    cluster = target.cluster
    assert cluster.mig is not None and cluster.gpu_reservation == "strict"
    assert (cluster.gpu_nodes_per_group, cluster.gpu_node_groups) == (1, 2)
    rendered = render_tfvars(target)
    assert rendered.file_vars["gpu_mig_manager_version"] == "v0.14.2"
    assert "gpu_nodes_reservation_policy" in rendered.runtime_vars


def test_mixed_backends_has_both() -> None:
    targets = resolve_targets(load_spec(EXAMPLES / "mixed-backends.yaml"))
    assert [(t.project_key, t.cluster_name, t.backend) for t in targets] == [
        ("research", "train", "mk8s"),
        ("research", "notebooks", "mk8s"),
        ("hpc", "slurm", "soperator"),
    ]
    assert targets[0].cluster.enable_gpu_cluster and targets[0].cluster.backend_explicit
    slurm = targets[2].cluster.soperator
    assert slurm is not None and slurm.control_plane.system.min_size == 3 and len(slurm.workers) == 2


def test_kuberay_example_enables_and_disables() -> None:
    enabled, disabled = resolve_targets(load_spec(EXAMPLES / "kuberay.yaml"))
    assert enabled.cluster.kuberay is not None and enabled.cluster.kuberay.worker_replicas == 2
    assert disabled.cluster.kuberay is None
    # the fleet installs KubeRay itself, never the recipe
    assert render_tfvars(enabled).file_vars["enable_kuberay_cluster"] is False
    assert render_tfvars(disabled).file_vars["enable_kuberay_cluster"] is False
