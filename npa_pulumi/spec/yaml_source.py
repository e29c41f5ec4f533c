"""Safe YAML loading with positions.

The spec is parsed into a node graph, then turned into plain Python data by our own walker so that we
control everything an untrusted document could abuse: size, nesting depth, alias expansion
(billion-laughs), duplicate keys, unknown tags. Every mapping key and list item gets its 1-based (line,
column) recorded under its spec path (the nodes' start marks), which is how validation errors point at the
file.

The parser is libyaml's, through PyYAML's C loader, when PyYAML was built with it (its wheels are): a
10,000-cluster spec composes in ~0.06 s instead of ~1.2 s. Its events are read once first, in C, to enforce
the value-count and nesting bounds before a node is composed. A document it refuses (or that breaks a
bound) is parsed again by ruamel.yaml's pure-Python parser, so every refusal is worded and located exactly
as before; without libyaml (or with `NPA_SPEC_PARSER=pure`) that parser does the whole job. Both resolve
scalars as YAML 1.1.

Scalars resolve with YAML 1.1 rules, as PyYAML's `safe_load` in the original tool did, so existing specs
keep their meaning (`enabled: yes` is a boolean). Numbers keep their source text so a string field such
as `k8s_version: 1.30` reads back as "1.30", not "1.3".
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import MappingEndEvent, MappingStartEvent, SequenceEndEvent, SequenceStartEvent
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from npa_pulumi.spec.errors import SpecError, SpecProblem, single_problem
from npa_pulumi.spec.names import PathTuple, format_path

MAX_SPEC_BYTES = 4 * 1024 * 1024  # a real fleet spec is a few KiB
MAX_DEPTH = 64  # real specs nest ~6 levels
MAX_EVENTS = 50_000  # values as written; the pure-Python parser needs ~0.1 ms each, so this bounds time
MAX_NODES = 200_000  # after alias expansion; bounds alias bombs

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP = (
    _TAG + name for name in ("str", "int", "float", "bool", "null", "timestamp")
)
_MAP, _SEQ, _MERGE = _TAG + "map", _TAG + "seq", _TAG + "merge"
# ruamel's YAML 1.1 resolver reads y/n as booleans; PyYAML (the original's parser) keeps them as text.
_NOT_BOOLEANS = frozenset({"y", "Y", "n", "N"})
_UNSIGNED_EXPONENT = re.compile(r"[eE][0-9]")


class SourceInt(int):
    """An int that remembers how it was written (`0x10`, `1_000`)."""

    yaml_text: str

    def __new__(cls, value: int, text: str) -> SourceInt:
        obj = super().__new__(cls, value)
        obj.yaml_text = text
        return obj


class SourceFloat(float):
    """A float that remembers how it was written, so `1.30` can read back as the string "1.30"."""

    yaml_text: str

    def __new__(cls, value: float, text: str) -> SourceFloat:
        obj = super().__new__(cls, value)
        obj.yaml_text = text
        return obj


@dataclass
class LocationIndex:
    """1-based (line, column) of every mapping key and list item, by spec path."""

    marks: dict[PathTuple, tuple[int, int]] = field(default_factory=dict)

    def position(self, path: PathTuple) -> tuple[int, int] | None:
        """The position of `path`, else of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            mark = self.marks.get(path[:end])
            if mark is not None:
                return mark
        return None

    def exact(self, path: PathTuple) -> tuple[int, int] | None:
        return self.marks.get(path)


def read_spec_text(path: str | Path) -> str:
    """Read a spec file as UTF-8 text, turning every I/O and encoding failure into a SpecError."""
    source = str(path)
    try:
        file_path = Path(path).expanduser()
        with file_path.open("rb") as handle:
            data = handle.read(MAX_SPEC_BYTES + 1)
    except FileNotFoundError:
        raise single_problem("spec file not found", source) from None
    except IsADirectoryError:
        raise single_problem("spec path is a directory, not a file", source) from None
    except PermissionError:
        raise single_problem("spec file is not readable (permission denied)", source) from None
    except OSError as err:
        raise single_problem(f"cannot read spec file: {err.strerror or err}", source) from None
    return decode_spec_bytes(data, source)


def _too_big(source: str) -> SpecError:
    return single_problem(
        f"spec is larger than {MAX_SPEC_BYTES // (1024 * 1024)} MiB",
        source,
        hint="a fleet spec is a small YAML file; check that the right file was given",
    )


def decode_spec_bytes(data: bytes, source: str) -> str:
    if len(data) > MAX_SPEC_BYTES:
        raise _too_big(source)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise single_problem(
            "spec is not valid UTF-8 text", source, line=line, column=column, hint="save the file as UTF-8"
        ) from None


def _new_yaml() -> YAML:
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 1)  # the original used PyYAML (YAML 1.1) scalar resolution
    return yaml


def _libyaml() -> bool:
    """Whether the C parser is there (and not switched off with NPA_SPEC_PARSER=pure)."""
    return bool(getattr(pyyaml, "__with_libyaml__", False)) and os.environ.get("NPA_SPEC_PARSER") != "pure"


def load_yaml(text: str, source: str) -> tuple[Any, LocationIndex]:
    """Parse one YAML document into plain data (None for an empty document) and its positions."""
    if len(text) > MAX_SPEC_BYTES:
        raise _too_big(source)
    yaml = _new_yaml()
    fast = _libyaml()
    root: Any = None
    if fast:
        try:
            root = _compose_libyaml(text, source)
        except Exception:  # a document libyaml refuses: the pure parser says why, exactly as it always did
            fast = False
        # An empty document: libyaml takes stray byte-order marks for nothing that ruamel refuses, so the
        # pure parser decides what (if anything) is there.
        fast = fast and root is not None
    try:
        if not fast:
            root = _compose_checked(text, source)
    except SpecError:
        raise
    except (MarkedYAMLError, pyyaml.MarkedYAMLError) as err:
        raise _yaml_syntax_error(err, source) from None
    except (YAMLError, pyyaml.YAMLError) as err:
        line, column = _reader_position(err, text)
        message = f"invalid YAML: {_one_line(str(err))}"
        raise single_problem(message, source, line=line, column=column) from None
    except RecursionError:
        raise single_problem(f"spec nests deeper than {MAX_DEPTH} levels", source) from None
    except Exception as err:  # the parser is third-party code fed untrusted input: never leak a traceback
        raise single_problem(f"invalid YAML: {type(err).__name__}: {_one_line(str(err))}", source) from None
    index = LocationIndex()
    if root is None:
        return None, index
    builder = _Builder(yaml, index, fast)
    builder.mark((), root)  # problems about the document itself, or a missing top-level key, point here
    data = builder.build(root, (), 0)
    if builder.problems:
        raise SpecError(builder.problems, source)
    return data, index


class _CheckedYAML(YAML):
    """A loader whose parser enforces the event-count and nesting bounds (`_check_event`) on each event as
    the composer reads it: one parse instead of a checking parse and then a composing one (parsing is most
    of the cost of loading a large spec), and the bounds still stop a hostile document before its nodes
    are composed any deeper."""

    source = "<string>"

    def get_constructor_parser(self, stream: Any) -> Any:
        constructor, parser = super().get_constructor_parser(stream)
        read_event = parser.get_event
        state = [0, 0]  # events read, current depth

        def checked() -> Any:
            event = read_event()
            _check_event(event, state, self.source)
            return event

        parser.get_event = checked
        return constructor, parser


def _compose_libyaml(text: str, source: str) -> Any:
    """libyaml's node graph of `text`, after its events passed the bounds (one pass in C; a hostile
    document stops before a node is composed)."""
    state = [0, 0]
    for event in pyyaml.parse(text, Loader=pyyaml.CSafeLoader):
        _check_event(event, state, source)
    return pyyaml.compose(text, Loader=pyyaml.CSafeLoader)


def _compose_checked(text: str, source: str) -> Node | None:
    loader = _CheckedYAML(typ="safe", pure=True)
    loader.version = (1, 1)
    loader.source = source
    node: Node | None = loader.compose(text)
    return node


def _check_event(event: Any, state: list[int], source: str) -> None:
    state[0] += 1
    if state[0] > MAX_EVENTS + 1:
        mark = event.start_mark
        raise single_problem(
            f"spec has more than {MAX_EVENTS} values",
            source,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            hint="a fleet spec is a small YAML file; check that the right file was given",
        )
    if isinstance(event, _OPENING):
        state[1] += 1
        if state[1] > MAX_DEPTH:
            mark = event.start_mark
            raise single_problem(
                f"spec nests deeper than {MAX_DEPTH} levels",
                source,
                line=mark.line + 1 if mark else None,
                column=mark.column + 1 if mark else None,
            )
    elif isinstance(event, _CLOSING):
        state[1] -= 1


_OPENING = (MappingStartEvent, SequenceStartEvent, pyyaml.MappingStartEvent, pyyaml.SequenceStartEvent)
_CLOSING = (MappingEndEvent, SequenceEndEvent, pyyaml.MappingEndEvent, pyyaml.SequenceEndEvent)
_SCALAR = (ScalarNode, pyyaml.ScalarNode)
_SEQUENCE = (SequenceNode, pyyaml.SequenceNode)
_MAPPING = (MappingNode, pyyaml.MappingNode)


def _yaml_syntax_error(err: MarkedYAMLError | pyyaml.MarkedYAMLError, source: str) -> SpecError:
    mark = err.problem_mark or err.context_mark
    problem = err.problem or err.context or "malformed YAML"
    context = f" ({err.context})" if err.context and err.problem else ""
    return single_problem(
        f"invalid YAML: {problem}{context}",
        source,
        line=mark.line + 1 if mark is not None else None,
        column=mark.column + 1 if mark is not None else None,
    )


def _reader_position(err: YAMLError | pyyaml.YAMLError, text: str) -> tuple[int | None, int | None]:
    """Line and column of a reader error (e.g. a control character), which carries only an offset."""
    position = getattr(err, "position", None)
    if not isinstance(position, int) or not 0 <= position <= len(text):
        return None, None
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


# A node of either parser's graph (ruamel's or PyYAML's): the same shape (tag, value, start_mark).
YamlNode = Any


def _tag(node: YamlNode) -> str:
    tag = node.tag
    return str(getattr(tag, "value", tag))


class _Builder:
    """Turns a composed node graph into plain data, collecting problems instead of stopping at the first."""

    def __init__(self, yaml: YAML, index: LocationIndex, libyaml: bool = False) -> None:
        # Each parser's nodes are read by its own library's constructor (the same YAML 1.1 rules).
        self.constructor: Any = pyyaml.SafeLoader("") if libyaml else SafeConstructor(loader=yaml)
        self.index = index
        self.problems: list[SpecProblem] = []
        self.nodes = 0
        self.too_big = False
        # Inside a merge source (`<<: *anchor`) positions never replace those of keys written in place.
        self.merging = 0

    def problem(self, node: YamlNode, path: PathTuple, message: str, hint: str | None = None) -> None:
        mark = node.start_mark
        self.problems.append(
            SpecProblem(
                path=format_path(path),
                line=mark.line + 1 if mark else None,
                column=mark.column + 1 if mark else None,
                message=message,
                hint=hint,
            )
        )

    def build(self, node: YamlNode, path: PathTuple, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES or depth > MAX_DEPTH:
            if not self.too_big:
                self.too_big = True
                why = "expands to too many values" if self.nodes > MAX_NODES else "nests too deeply"
                self.problem(
                    node,
                    path,
                    f"spec {why} (anchors/aliases are expanded)",
                    "avoid recursive or repeatedly nested aliases",
                )
            return None
        if isinstance(node, _SCALAR):
            return self.scalar(node, path)
        if isinstance(node, _SEQUENCE):
            if _tag(node) != _SEQ:
                self.problem(node, path, f"unsupported YAML tag {_tag(node)!r}", "use a plain list")
                return None
            items = []
            for position, child in enumerate(node.value):
                child_path = (*path, position)
                self.mark(child_path, child)
                items.append(self.build(child, child_path, depth + 1))
            return items
        if isinstance(node, _MAPPING):
            if _tag(node) != _MAP:
                self.problem(node, path, f"unsupported YAML tag {_tag(node)!r}", "use a plain mapping")
                return None
            return self.mapping(node, path, depth)
        self.problem(node, path, "unsupported YAML node")
        return None

    def mark(self, path: PathTuple, node: YamlNode) -> None:
        mark = node.start_mark
        if mark is not None and not (self.merging and path in self.index.marks):
            self.index.marks[path] = (mark.line + 1, mark.column + 1)

    def mapping(self, node: YamlNode, path: PathTuple, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        seen: dict[str, YamlNode] = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, _SCALAR) and _tag(key_node) == _MERGE:
                merged.update(
                    {k: v for k, v in self.merge_sources(value_node, path, depth).items() if k not in merged}
                )
                continue
            if not isinstance(key_node, _SCALAR):
                self.problem(key_node, path, "mapping keys must be plain scalars")
                continue
            key = str(key_node.value)
            if key in seen:
                first = seen[key].start_mark
                where = f" (first defined at line {first.line + 1})" if first else ""
                self.problem(key_node, (*path, key), f"duplicate key '{key}'{where}", "remove one of them")
                continue
            seen[key] = key_node
            child_path = (*path, key)
            self.mark(child_path, key_node)
            result[key] = self.build(value_node, child_path, depth + 1)
        # Merge keys (`<<: *anchor`) never override keys written in the mapping itself.
        return {**{k: v for k, v in merged.items() if k not in result}, **result}

    def merge_sources(self, node: YamlNode, path: PathTuple, depth: int) -> dict[str, Any]:
        sources = node.value if isinstance(node, _SEQUENCE) else [node]
        combined: dict[str, Any] = {}
        self.merging += 1
        try:
            for source in sources:
                self.nodes += 1
                if not isinstance(source, _MAPPING):
                    self.problem(source, path, "a merge key ('<<') must refer to a mapping")
                    continue
                for key, value in self.mapping(source, path, depth + 1).items():
                    combined.setdefault(key, value)
        finally:
            self.merging -= 1
        return combined

    def scalar(self, node: YamlNode, path: PathTuple) -> Any:
        tag = _tag(node)
        text = str(node.value)
        if (
            tag in (_STR, _TIMESTAMP)
            or (tag == _BOOL and text in _NOT_BOOLEANS)
            or (tag == _FLOAT and ("." not in text or _UNSIGNED_EXPONENT.search(text)))
        ):
            # Dates stay the text the user wrote; YAML 1.1 floats need a dot (`1e5` is text) and a signed
            # exponent (`1.5e3` is text, as PyYAML and libyaml read it; ruamel alone took it for a float).
            return text
        try:
            if tag == _NULL:
                return None
            if tag == _BOOL:
                return bool(self.constructor.construct_yaml_bool(node))
            if tag == _INT:
                return SourceInt(int(self.constructor.construct_yaml_int(node)), text)
            if tag == _FLOAT:
                return SourceFloat(float(self.constructor.construct_yaml_float(node)), text)
        except Exception:  # a scalar the resolver tagged but the constructor rejects
            self.problem(node, path, f"cannot read the value {text[:40]!r}")
            return None
        self.problem(node, path, f"unsupported YAML tag {tag!r}", "remove the tag; plain values are enough")
        return None
