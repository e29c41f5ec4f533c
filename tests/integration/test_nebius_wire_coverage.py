"""Every `CloudPort` method of the `nebius` adapter is exercised by at least one wire-level test.

Tests declare what they cover with `@covers(...)`; the backend fixture fails a test whose declared
methods were not actually called through the port. This meta-test closes the loop: it loads every
`test_nebius_wire*.py` module and checks that the declarations, taken together, name every method of
the Protocol, and that the `nebius` backend is always among the backends those scenarios run on.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from wire.backends import backend_kinds
from wire.coverage import REGISTRY, port_methods

from npa_pulumi.cloud.nebius import NebiusCloud

pytestmark = pytest.mark.integration


def _load_wire_test_modules() -> list[str]:
    here = Path(__file__).resolve()
    loaded = []
    for path in sorted(here.parent.glob("test_nebius_wire*.py")):
        if path == here:
            continue
        if path.stem not in sys.modules:
            spec = importlib.util.spec_from_file_location(f"wire_coverage_{path.stem}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            # Registered first: a dataclass with string annotations looks its module up (run alone, the
            # file's wire modules were not imported by pytest before this test).
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        loaded.append(path.stem)
    return loaded


def test_every_port_method_has_a_wire_test() -> None:
    assert _load_wire_test_modules(), "no wire test modules found"
    covered = set().union(*REGISTRY.values()) if REGISTRY else set()
    missing = port_methods() - covered
    assert not missing, f"CloudPort methods without a wire test: {sorted(missing)}"
    assert all(name.rsplit("::", 1)[-1].startswith("test_") for name in REGISTRY)


def test_the_scenarios_always_run_against_the_nebius_adapter() -> None:
    assert "nebius" in backend_kinds()
    assert port_methods() <= {name for name in dir(NebiusCloud) if not name.startswith("_")}


def test_the_port_has_the_methods_the_issue_lists() -> None:
    # Guards the enumeration itself: an empty or broken Protocol walk would make the check vacuous.
    assert {"principal", "create_project", "list_quota_allowances", "probe_bucket", "delete_node_group"} <= (
        port_methods()
    )
    assert len(port_methods()) >= 30
