"""Every test module has a basename of its own across tests/: pytest imports them as top-level modules
(the test directories are not packages), so a second `test_x.py` elsewhere stops the whole collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def test_test_module_basenames_are_unique() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert names, "no test modules found"
    assert [name for name, count in names.items() if count > 1] == []
