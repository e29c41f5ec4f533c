"""Property: whatever the input, loading a spec raises SpecError or nothing, and a spec that loads plans,
renders and resolves with nothing but the product's own expected errors."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from spec_mutation import ACTIONS, mutated

from npa_pulumi.errors import NpaError
from npa_pulumi.plan import plan_document, render_plan_text, render_tfvars, resolve_targets
from npa_pulumi.spec import FleetSpec, SpecError, load_spec, parse_spec
from npa_pulumi.spec.models import MK8S_FIELDS

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SEEDS = [
    YAML(typ="safe").load(EXAMPLES / name)
    for name in ("fleet1-test.yaml", "rtxpro-mig.yaml", "mixed-backends.yaml", "kuberay.yaml")
]

FIELD_NAMES = sorted(
    {
        *MK8S_FIELDS,
        "apiVersion",
        "name",
        "tenant_id",
        "region",
        "project_prefix",
        "profile",
        "defaults",
        "projects",
        "clusters",
        "project_id",
        "object_storage",
        "backend",
        "mk8s",
        "soperator",
        "count",
        "platform",
        "preset",
        "disk_size_gib",
        "capacity_block_group",
        "preemptible",
        "enabled",
        "strategy",
        "config",
        "worker_replicas",
        "worker_cpus",
        "worker_memory_gib",
        "storage_class",
        "size_gibibytes",
        "bucket_name",
        "workers",
        "control_plane",
        "system",
        "min_size",
        "size",
        "fabric",
    }
)
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-10, max_value=10**12),
    st.floats(allow_nan=False),
    st.sampled_from(
        [
            "",
            "cpu-d3",
            "gpu-rtx6000",
            "1gpu-24vcpu-218gb",
            "8gpu-128vcpu-1600gb",
            "gpu-h200-sxm",
            "mixed",
            "all-balanced",
            "operator",
            "auto",
            "managed-image",
            "rtx-rendering",
            "soperator",
            "mk8s",
            "enhanced",
            "1.34",
            "/mnt/data",
            "a",
            "A_b",
            "x" * 70,
        ]
    ),
    st.text(max_size=20),
)
keys = st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=12))
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=6)),
    max_leaves=40,
)
yaml_fragments = st.lists(
    st.sampled_from(
        [
            "name: ",
            "projects:",
            "\n",
            "  ",
            "- ",
            "{",
            "}",
            "[",
            "]",
            ", ",
            ": ",
            "&a ",
            "*a ",
            "<<: ",
            "!!str ",
            "!tag ",
            "'",
            '"',
            "#",
            "---",
            "...",
            "? ",
            "|",
            ">",
            "defaults:",
            "cpu_nodes:",
            "count: 1",
            "yes",
            "~",
            "1.30",
            "\t",
            "%YAML 1.2",
            "\x00",
            "\u2028",
            "é",
        ]
    ),
    max_size=40,
).map("".join)


def must_only_raise_spec_error(text: str) -> FleetSpec | None:
    try:
        spec = parse_spec(text, "property.yaml")
    except SpecError as err:
        assert err.problems, "a SpecError always carries problems"
        reported = [(p.path, p.line, p.column, p.message) for p in err.problems]
        assert len(reported) == len(set(reported)), "no problem is reported twice"
        assert str(err).startswith("invalid fleet spec property.yaml")
        json.dumps(err.to_dict())
        return None
    assert isinstance(spec, FleetSpec)
    return spec


def exercise(spec: FleetSpec) -> None:
    """Everything downstream of a loaded spec fails, if at all, with the product's own errors."""
    try:
        targets = resolve_targets(spec)
        render_plan_text(plan_document(spec, targets))
        for target in targets:
            if target.backend == "mk8s":
                rendered = render_tfvars(target)
                block = target.cluster.capacity_block_group_value()
                if block:
                    assert block not in json.dumps(rendered.file_vars)
    except NpaError:
        pass


@SETTINGS
@given(st.text(max_size=300))
def test_random_text(text: str) -> None:
    must_only_raise_spec_error(text)


@SETTINGS
@given(yaml_fragments)
def test_yaml_shaped_noise(text: str) -> None:
    must_only_raise_spec_error(text)


@SETTINGS
@given(trees)
def test_random_documents(tree: Any) -> None:
    spec = must_only_raise_spec_error(json.dumps(tree, default=str))
    if spec is not None:
        exercise(spec)


mutation = st.tuples(
    st.sampled_from([action for action in ACTIONS if action != "retype"]),
    trees,
    keys,
    st.floats(min_value=0, max_value=1, exclude_max=True),
)


@SETTINGS
@given(st.sampled_from(range(len(SEEDS))), st.lists(mutation, min_size=1, max_size=4))
def test_mutated_examples(seed: int, mutations: list[tuple[str, Any, str, float]]) -> None:
    document = mutated(SEEDS[seed], mutations)
    spec = must_only_raise_spec_error(json.dumps(document, default=str))
    if spec is not None:
        exercise(spec)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_from_a_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "fleet.yaml"
        path.write_bytes(data)
        try:
            load_spec(path)
        except SpecError as err:
            assert err.problems


def test_the_unmutated_examples_load() -> None:
    for seed in SEEDS:
        spec = must_only_raise_spec_error(json.dumps(seed))
        assert spec is not None
        exercise(spec)
