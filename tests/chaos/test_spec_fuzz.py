"""Fuzzing the spec loader: generated and mutated specs (10,000 in the long run) never produce anything
but a located SpecError — no other exception, no problem without a place, no traceback from the CLI.

"Located" means every problem names the file and either a spec path (`projects[1].clusters[0].name`) or a
line and column; a spec that loads plans and renders tfvars without anything but the product's own errors.
The generators extend tests/unit/spec/test_spec_property.py's: whole random documents, YAML-shaped noise,
structural mutations of every example (replace / delete / insert / duplicate / retype), and line-level
mutations of the examples' YAML text (drop, duplicate, swap, re-indent, truncate, splice noise).
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from conftest import SEED, budget
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from spec_mutation import ACTIONS, mutated
from spec_mutation import keys as keys_of

from npa_pulumi.errors import NpaError
from npa_pulumi.plan import plan_document, render_plan_text, render_tfvars, resolve_targets
from npa_pulumi.spec import FleetSpec, SpecError, parse_spec
from npa_pulumi.spec.models import MK8S_FIELDS

EXAMPLES = sorted(
    p
    for p in (Path(__file__).resolve().parents[2] / "examples").glob("*.yaml")
    if "apiVersion: npa.fleet" in p.read_text()
)
SEED_TEXTS = [p.read_text() for p in EXAMPLES]
SEED_DOCS = [YAML(typ="safe").load(text) for text in SEED_TEXTS]

# 10,000 specs in the long run, split over the five generators below; a few hundred in the quick run.
TOTAL = budget(quick=500, long=10_000)
SHARE = {"documents": 0.2, "noise": 0.1, "structure": 0.35, "lines": 0.3, "cli": 0.05}


def examples(name: str) -> int:
    return max(1, math.ceil(TOTAL * SHARE[name]))


def fuzz_settings(name: str) -> settings:
    return settings(
        max_examples=examples(name),
        deadline=None,
        derandomize=False,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


FIELD_NAMES = sorted({*MK8S_FIELDS, *(k for doc in SEED_DOCS for k in keys_of(doc))})

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            "",
            " ",
            "cpu-d3",
            "gpu-h200-sxm",
            "8gpu-128vcpu-1600gb",
            "capacityblockgroup-local1",
            "project-existing1",
            "us-central1",
            "mk8s",
            "soperator",
            "STRICT",
            "1.34",
            "yes",
            "no",
            "null",
            "~",
            "0x1f",
            "1e3",
            "x" * 300,
            "a.b",
            "UPPER",
            "名前",
        ]
    ),
    st.text(max_size=24),
)
keys = st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=12))
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=7)),
    max_leaves=50,
)
yaml_noise = st.lists(
    st.sampled_from(
        [
            "apiVersion: npa.fleet/v0.0.1\n",
            "name: f\n",
            "projects:\n",
            "  - name: p\n",
            "    clusters:\n",
            "      - name: c\n",
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
            "<<: *a\n",
            "!!python/object:os.system ",
            "!!binary ",
            "'",
            '"',
            "#",
            "---\n",
            "...\n",
            "? ",
            "|\n",
            ">-\n",
            "\t",
            "%YAML 1.1\n",
            "\x00",
            "\ufeff",
            "\u2028",
            "é",
            "1_000",
            "0o17",
            ".inf",
        ]
    ),
    max_size=50,
).map("".join)


def located(text: str, source: str = "fuzz.yaml") -> FleetSpec | None:
    """Load `text`; only a SpecError whose every problem has a place may come out."""
    try:
        spec = parse_spec(text, source)
    except SpecError as err:
        assert err.problems, "a SpecError always carries problems"
        for problem in err.problems:
            if not problem.path and problem.line is None:
                # Only a document without a single node has nothing to point at.
                assert _empty_document(text), f"unlocated: {problem!r}\n--- spec:\n{text}"
            if problem.line is not None:
                assert problem.line >= 1 and (problem.column or 1) >= 1, problem
        assert str(err).startswith(f"invalid fleet spec {source}")
        json.dumps(err.to_dict())
        return None
    assert isinstance(spec, FleetSpec)
    return spec


def _empty_document(text: str) -> bool:
    try:
        return YAML(typ="safe", pure=True).load(text) is None
    except Exception:
        return False


def downstream(spec: FleetSpec) -> None:
    """A spec that loads plans and renders with nothing but the product's own errors."""
    try:
        targets = resolve_targets(spec)
        render_plan_text(plan_document(spec, targets))
        for target in targets:
            if target.backend == "mk8s":
                render_tfvars(target)
    except NpaError:
        pass


structural = st.tuples(
    st.sampled_from(ACTIONS),
    trees,
    keys,
    st.floats(min_value=0, max_value=1, exclude_max=True),
)
line_edit = st.tuples(
    st.sampled_from(["drop", "duplicate", "swap", "indent", "dedent", "truncate", "splice"]),
    st.floats(min_value=0, max_value=1, exclude_max=True),
    st.floats(min_value=0, max_value=1, exclude_max=True),
    yaml_noise,
)


def _edit_lines(text: str, edits: list[tuple[str, float, float, str]]) -> str:
    lines = text.splitlines(keepends=True)
    for action, where, other, noise in edits:
        if not lines:
            lines = [noise]
            continue
        i = math.floor(where * len(lines))
        j = math.floor(other * len(lines))
        if action == "drop":
            del lines[i]
        elif action == "duplicate":
            lines.insert(i, lines[i])
        elif action == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "indent":
            lines[i] = "  " + lines[i]
        elif action == "dedent":
            lines[i] = lines[i][2:] if lines[i].startswith("  ") else lines[i].lstrip()
        elif action == "truncate":
            cut = math.floor(other * len(lines[i]))
            lines[i] = lines[i][:cut]
        elif action == "splice":
            cut = math.floor(other * len(lines[i]))
            lines[i] = lines[i][:cut] + noise + lines[i][cut:]
    return "".join(lines)


@seed(SEED)
@fuzz_settings("documents")
@given(trees)
def test_generated_documents(tree: Any) -> None:
    spec = located(json.dumps(tree, default=str))
    if spec is not None:
        downstream(spec)


@seed(SEED)
@fuzz_settings("noise")
@given(yaml_noise)
def test_yaml_shaped_noise(text: str) -> None:
    located(text)


@seed(SEED)
@fuzz_settings("structure")
@given(st.sampled_from(range(len(SEED_DOCS))), st.lists(structural, min_size=1, max_size=5))
def test_structurally_mutated_examples(which: int, mutations: list[tuple[str, Any, str, float]]) -> None:
    spec = located(json.dumps(mutated(SEED_DOCS[which], mutations), default=str))
    if spec is not None:
        downstream(spec)


@seed(SEED)
@fuzz_settings("lines")
@given(st.sampled_from(range(len(SEED_TEXTS))), st.lists(line_edit, min_size=1, max_size=6))
def test_line_mutated_examples(which: int, edits: list[tuple[str, float, float, str]]) -> None:
    spec = located(_edit_lines(SEED_TEXTS[which], edits))
    if spec is not None:
        downstream(spec)


@seed(SEED)
@fuzz_settings("cli")
@given(st.sampled_from(range(len(SEED_TEXTS))), st.lists(line_edit, min_size=1, max_size=4))
def test_the_cli_reports_mutated_specs_as_input_errors(
    which: int, edits: list[tuple[str, float, float, str]]
) -> None:
    """Through `npa-pulumi plan`: exit 0 or 2 (invalid input), never a traceback; errors name the file."""
    from npa_pulumi.cli.main import cli

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "fleet.yaml"
        path.write_text(_edit_lines(SEED_TEXTS[which], edits))
        result = CliRunner().invoke(cli, ["plan", "--spec", str(path), "--output", "json"])
    assert result.exit_code in (0, 2), (result.exit_code, result.output[-2000:], result.exception)
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert str(path) in result.output


def test_every_example_loads_unmutated() -> None:
    assert len(SEED_TEXTS) >= 4
    for path, text in zip(EXAMPLES, SEED_TEXTS, strict=True):
        assert located(text, str(path)) is not None, path
