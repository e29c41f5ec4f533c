"""No class in the package passes 400 lines (issue 60): a class that long holds several concerns; split it
by concern (as engine/context.py's FleetContext was, into engine/stack_ops.py and engine/outputs_cache.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import npa_pulumi

PACKAGE = Path(npa_pulumi.__file__).resolve().parent
MAX_CLASS_LINES = 400


def _classes(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        (node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    ]


def test_no_class_in_the_package_passes_400_lines() -> None:
    # components/ and policies/ are links into the package: rglob follows neither, so they are read here.
    roots = [PACKAGE, PACKAGE.parent / "components", PACKAGE.parent / "policies"]
    files = sorted({p.resolve() for root in roots if root.is_dir() for p in root.rglob("*.py")})
    assert len(files) > 100  # the whole package was read
    long = [
        f"{path}: {name} ({lines} lines)"
        for path in files
        for name, lines in _classes(path)
        if lines > MAX_CLASS_LINES
    ]
    assert long == []


def test_a_class_is_measured_from_its_line_to_its_last_including_nested_ones(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES - 2))
    path = tmp_path / "long.py"
    path.write_text(f"class Long:\n    class Inner:\n        y = 1\n{body}\n")
    assert _classes(path) == [("Long", MAX_CLASS_LINES + 1), ("Inner", 2)]
