"""Reading spec files: every malformed, hostile or odd input becomes a SpecError with a position."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.errors import EXIT_INVALID_INPUT, UserInputError
from npa_pulumi.spec import SpecError, load_spec, parse_spec, yaml_source
from npa_pulumi.spec.yaml_source import MAX_DEPTH, MAX_SPEC_BYTES, load_yaml

VALID = """\
apiVersion: npa.fleet/v0.0.1
name: demo
region: eu-north1
projects:
  - name: a
    clusters:
      - cpu_nodes: {count: 1, preset: 16vcpu-64gb}
"""


def error_of(text: str) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "fleet.yaml")
    return caught.value


def test_valid_text_parses() -> None:
    spec = parse_spec(VALID)
    assert spec.name == "demo"
    assert spec.projects[0].clusters[0].cpu_nodes is not None


def test_spec_error_is_a_user_input_error_with_exit_code_2() -> None:
    err = error_of("name: [")
    assert isinstance(err, UserInputError)
    assert err.exit_code == EXIT_INVALID_INPUT


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("name: demo\nprojects: [\n", 3, 1, "invalid YAML"),
        ("a: b: c\n", 1, 5, "mapping values are not allowed"),
        ("name: 'unterminated\n", 2, 1, "invalid YAML"),
        ("name: demo\n\tprojects: []\n", 2, 1, "invalid YAML"),
        ("--- 1\n--- 2\n", 2, 1, "single document"),
    ],
)
def test_malformed_yaml_is_located(text: str, line: int, column: int, fragment: str) -> None:
    err = error_of(text)
    [problem] = err.problems
    assert fragment in problem.message
    assert (problem.line, problem.column) == (line, column)
    assert f"fleet.yaml:{line}:{column}:" in str(err)


@pytest.mark.parametrize("text", ["", "   \n", "# only a comment\n", "---\n", "~\n"])
def test_empty_document(text: str) -> None:
    [problem] = error_of(text).problems
    assert problem.message == "the spec is empty"
    assert problem.hint and "apiVersion" in problem.hint


@pytest.mark.parametrize(
    ("text", "kind"),
    [("- a\n- b\n", "a list"), ("just text\n", "a single value"), ("42\n", "a single value")],
)
def test_non_mapping_root(text: str, kind: str) -> None:
    [problem] = error_of(text).problems
    assert problem.message == f"the spec must be a mapping, not {kind}"
    assert problem.line == 1


def test_duplicate_keys_are_rejected_with_both_lines() -> None:
    err = error_of(VALID + "name: again\n")
    [problem] = err.problems
    assert problem.path == "name"
    assert problem.line == 8
    assert "first defined at line 2" in problem.message


def test_duplicate_keys_in_nested_mappings() -> None:
    err = error_of(VALID.replace("{count: 1, preset: 16vcpu-64gb}", "{count: 1, count: 2}"))
    assert [p.path for p in err.problems] == ["projects[0].clusters[0].cpu_nodes.count"]


def test_deep_nesting_is_rejected_before_composition() -> None:
    err = error_of("a: " + "[" * (MAX_DEPTH + 10) + "]" * (MAX_DEPTH + 10))
    [problem] = err.problems
    assert "deeper than" in problem.message
    assert problem.line == 1


def test_very_deep_nesting_does_not_recurse() -> None:
    err = error_of("[" * 100_000)
    assert "deeper than" in err.problems[0].message


def test_alias_bomb_is_bounded() -> None:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{','.join(['*' + previous] * 9)}]")
    err = error_of("\n".join(lines) + "\n")
    assert any("too many values" in p.message for p in err.problems)


def test_recursive_alias_is_bounded() -> None:
    err = error_of("a: &a [*a]\n")
    assert any("anchors/aliases" in p.message for p in err.problems)


def test_small_aliases_and_merge_keys_work() -> None:
    text = """\
name: demo
defaults:
  cpu_nodes: &cpu {count: 1, platform: cpu-d3, preset: 16vcpu-64gb}
projects:
  - name: a
    clusters:
      - cpu_nodes: *cpu
      - name: big
        cpu_nodes:
          <<: *cpu
          count: 4
"""
    spec = parse_spec(text)
    counts = [c.cpu_nodes.count for c in spec.projects[0].clusters if c.cpu_nodes]
    assert counts == [1, 4]


@pytest.mark.parametrize(
    "value",
    ["!!python/object/apply:os.system ['true']", "!custom x", "!!binary aGVsbG8=", "!!set {a, b}"],
)
def test_unsupported_tags_are_rejected(value: str) -> None:
    err = error_of(f"name: demo\nregion: {value}\nprojects: [{{name: a}}]\n")
    assert any("unsupported YAML tag" in p.message and p.path == "region" for p in err.problems)


def test_complex_keys_are_rejected() -> None:
    err = error_of("? [a, b]\n: 1\nname: demo\n")
    assert any("plain scalars" in p.message for p in err.problems)


def test_yaml_11_booleans_and_number_text() -> None:
    text = VALID.replace(
        "      - cpu_nodes:", "      - enable_filestore: yes\n        k8s_version: 1.30\n        cpu_nodes:"
    )
    cluster = parse_spec(text).projects[0].clusters[0]
    assert cluster.enable_filestore is True
    assert cluster.k8s_version == "1.30"


def test_dates_are_kept_as_written() -> None:
    spec = parse_spec(VALID.replace("region: eu-north1", "region: 2024-01-01"))
    assert spec.region == "2024-01-01"


def test_positions_are_one_based() -> None:
    data, index = load_yaml("a:\n  b: 1\n  c: [x, y]\n", "s")
    assert data == {"a": {"b": 1, "c": ["x", "y"]}}
    assert index.exact(("a",)) == (1, 1)
    assert index.exact(("a", "b")) == (2, 3)
    assert index.exact(("a", "c", 1)) == (3, 10)
    assert index.position(("a", "missing", "deeper")) == (1, 1)


def test_load_spec_reads_files(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(VALID)
    assert load_spec(path).name == "demo"
    assert load_spec(str(path)).name == "demo"


def test_load_spec_accepts_a_utf8_bom(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + VALID.encode())
    assert load_spec(path).name == "demo"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path / "nope.yaml")
    assert caught.value.problems[0].message == "spec file not found"
    assert str(tmp_path / "nope.yaml") in str(caught.value)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path)
    assert "directory" in caught.value.problems[0].message


def test_non_utf8_file_is_located(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(b"name: demo\nregion: caf\xe9\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    [problem] = caught.value.problems
    assert problem.message == "spec is not valid UTF-8 text"
    assert (problem.line, problem.column) == (2, 12)


def test_huge_file_is_rejected_without_parsing(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(b"# " + b"x" * (MAX_SPEC_BYTES + 10))
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert "larger than" in caught.value.problems[0].message


def test_huge_text_is_rejected() -> None:
    assert "larger than" in error_of("#" * (MAX_SPEC_BYTES + 1)).problems[0].message


def test_control_characters_are_rejected() -> None:
    err = error_of("name: demo\x00\n")
    assert "invalid YAML" in err.problems[0].message


def test_to_dict_lists_every_problem() -> None:
    err = error_of("name: Demo!\nprojects: []\nextra: 1\n")
    document = err.to_dict()
    assert document["kind"] == "invalid-spec"
    assert document["source"] == "fleet.yaml"
    assert len(document["problems"]) == len(err.problems) >= 2
    assert {"path", "line", "column", "message", "hint"} == set(document["problems"][0])


def test_too_many_values_are_rejected_before_composition(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yaml_source, "MAX_EVENTS", 1_000)  # the real bound (50k) is slow to reach in a test
    err = error_of("a: [" + "1," * 2_000 + "1]\n")
    assert "more than 1000 values" in err.problems[0].message


# ------------------------------------------------------------------ the C parser and the pure one agree

_REPO = Path(__file__).resolve().parents[3]
_TRICKY = """\
a: yes
b: y
c: NO
d: 1.30
e: 0x10
f: 1_000
g: 1e5
g2: 1.5e3
g3: 1.5e+3
h: 2026-01-02
i: ~
j: 010
k: 1:20
l: .inf
m: "quoted: 1"
n: [1, 2.5, off, on]
base: &b {x: 1, y: [a, b]}
merged:
  <<: *b
  y: [c]
"""


def _both(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    monkeypatch.setenv("NPA_SPEC_PARSER", "pure")
    pure = load_yaml(text, "spec.yaml")
    monkeypatch.delenv("NPA_SPEC_PARSER")
    fast = load_yaml(text, "spec.yaml")
    return pure, fast


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value, getattr(value, "yaml_text", None))


@pytest.mark.parametrize("name", [*sorted(p.name for p in (_REPO / "examples").glob("*.yaml")), "tricky"])
def test_the_c_parser_reads_every_spec_as_the_pure_one(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _TRICKY if name == "tricky" else (_REPO / "examples" / name).read_text()
    (pure, pure_index), (fast, fast_index) = _both(text, monkeypatch)
    assert _typed(fast) == _typed(pure)
    assert fast_index.marks == pure_index.marks


@pytest.mark.parametrize(
    "text",
    ["a: [1, 2", "a: b: c", "a:\n  - 1\n - 2", "a: 1\na: 2", "\t- x", "a: !!python/object x", "- &a [*a]"],
)
def test_both_parsers_refuse_alike_with_a_line(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def outcome() -> Any:
        try:
            return load_yaml(text, "spec.yaml")[0]
        except SpecError as err:
            return [(p.line, p.path) for p in err.problems]

    monkeypatch.setenv("NPA_SPEC_PARSER", "pure")
    pure = outcome()
    monkeypatch.delenv("NPA_SPEC_PARSER")
    fast = outcome()
    assert isinstance(fast, list) and isinstance(pure, list), (fast, pure)  # both refuse
    assert [path for _, path in fast] == [path for _, path in pure]
    # the same line, or the next one where libyaml points at the end of input rather than the opening `[`
    assert all(
        f is not None and p is not None and 0 <= f - p <= 1 for (f, _), (p, _) in zip(fast, pure, strict=True)
    )
