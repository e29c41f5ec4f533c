"""Unknown keys are rejected everywhere, legacy flat form included, with a did-you-mean suggestion."""

from __future__ import annotations

import json
from typing import Any

import pytest

from npa_pulumi.spec import SpecError, parse_spec

CPU = {"count": 1, "preset": "16vcpu-64gb"}


def only_problem(doc: dict[str, Any]) -> tuple[str, str, str | None]:
    with pytest.raises(SpecError) as caught:
        parse_spec(json.dumps({"name": "f", **doc}))
    [problem] = caught.value.problems
    return problem.path, problem.message, problem.hint


CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "top-level",
        {"regoin": "x", "projects": [{"name": "a", "clusters": [{"cpu_nodes": CPU}]}]},
        "regoin",
        "region",
    ),
    (
        "project",
        {"projects": [{"name": "a", "projectid": "p", "clusters": [{"cpu_nodes": CPU}]}]},
        "projects[0].projectid",
        "project_id",
    ),
    (
        "legacy-flat-cluster",
        {"projects": [{"name": "a", "clusters": [{"cpu_nodes": CPU, "enable_filestor": True}]}]},
        "projects[0].clusters[0].enable_filestor",
        "enable_filestore",
    ),
    (
        "defaults",
        {"defaults": {"cpu_nodes": CPU, "infiniband_fabrc": "f"}, "projects": [{"name": "a"}]},
        "defaults.infiniband_fabrc",
        "infiniband_fabric",
    ),
    (
        "pool",
        {
            "projects": [
                {
                    "name": "a",
                    "clusters": [
                        {"gpu_nodes": {"count": 1, "preset": "1gpu-24vcpu-218gb", "capacity_blok_group": "x"}}
                    ],
                }
            ]
        },
        "projects[0].clusters[0].gpu_nodes.capacity_blok_group",
        "capacity_block_group",
    ),
    (
        "envelope",
        {"projects": [{"name": "a", "clusters": [{"mk8s": {"cpu_nodes": CPU, "k8s_verison": "1.33"}}]}]},
        "projects[0].clusters[0].mk8s.k8s_verison",
        "k8s_version",
    ),
    (
        "mig",
        {"projects": [{"name": "a", "clusters": [{"cpu_nodes": CPU, "mig": {"enabeld": False}}]}]},
        "projects[0].clusters[0].mig.enabeld",
        "enabled",
    ),
    (
        "kuberay",
        {
            "projects": [
                {
                    "name": "a",
                    "clusters": [{"cpu_nodes": CPU, "kuberay": {"enabled": True, "worker_replica": 1}}],
                }
            ]
        },
        "projects[0].clusters[0].kuberay.worker_replica",
        "worker_replicas",
    ),
    (
        "object-storage",
        {
            "projects": [
                {
                    "name": "a",
                    "clusters": [{"cpu_nodes": CPU}],
                    "object_storage": {"size_gibibytes": 1, "storage_clas": "standard"},
                }
            ]
        },
        "projects[0].object_storage.storage_clas",
        "storage_class",
    ),
    (
        "soperator-worker",
        {
            "projects": [
                {
                    "name": "a",
                    "clusters": [
                        {"backend": "soperator", "soperator": {"workers": [{"name": "w", "siez": 2}]}}
                    ],
                }
            ]
        },
        "projects[0].clusters[0].soperator.workers[0].siez",
        "size",
    ),
]


@pytest.mark.parametrize(("doc", "path", "suggestion"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_unknown_key_is_rejected_with_a_suggestion(doc: dict[str, Any], path: str, suggestion: str) -> None:
    found_path, message, hint = only_problem(doc)
    assert found_path == path
    assert message == f"unknown field '{path.rsplit('.', 1)[-1]}'"
    assert hint == f"did you mean '{suggestion}'?"


def test_unknown_key_without_a_close_match_lists_the_valid_fields() -> None:
    path, message, hint = only_problem(
        {"projects": [{"name": "a", "clusters": [{"cpu_nodes": {**CPU, "zzz": 1}}]}]}
    )
    assert path == "projects[0].clusters[0].cpu_nodes.zzz"
    assert message == "unknown field 'zzz'"
    assert hint is not None and hint.startswith("valid fields: ") and "capacity_block_group" in hint


def test_not_silently_ignored_typo_that_would_deploy_on_demand() -> None:
    # A misspelt capacity block would have been ignored by the original's legacy form (on-demand GPUs).
    path, _, hint = only_problem(
        {
            "defaults": {
                "gpu_nodes": {"count": 1, "preset": "1gpu-24vcpu-218gb", "capacity-block-group": "cbg"}
            },
            "projects": [{"name": "a"}],
        }
    )
    assert path == "defaults.gpu_nodes.capacity-block-group"
    assert hint == "did you mean 'capacity_block_group'?"
