"""The fault campaign (issue 10): `make chaos-quick` (part of `make test`) and `make chaos` (long).

`NPA_CHAOS=quick|long` picks the budget (quick when unset): how many fuzzed specs, how many crash trials.
`NPA_CHAOS_SEED` replays a campaign: every random choice (kill points, fuzz seeds) derives from it, and
every failure message names it. Nothing here is timed: speed belongs to benchmarks/.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

CHAOS_MODE = os.environ.get("NPA_CHAOS", "quick").strip().lower() or "quick"
if CHAOS_MODE not in ("quick", "long"):
    raise pytest.UsageError(f"NPA_CHAOS must be quick or long, not {CHAOS_MODE!r}")
LONG = CHAOS_MODE == "long"
SEED = int(os.environ.get("NPA_CHAOS_SEED") or random.SystemRandom().randrange(1, 2**31))


def budget(quick: int, long: int) -> int:
    return long if LONG else quick


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: the fault campaign (tests/chaos), quick or long by NPA_CHAOS")


def pytest_report_header(config: pytest.Config) -> str:
    return f"chaos campaign: mode={CHAOS_MODE} seed={SEED} (replay with NPA_CHAOS_SEED={SEED})"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.chaos)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    """A generator seeded from the campaign seed and the test's name: reproducible per test."""
    return random.Random(f"{SEED}:{request.node.nodeid}")


@pytest.fixture(autouse=True)
def _fresh_transcript() -> Iterator[None]:
    from chaos_helpers import TRANSCRIPT

    TRANSCRIPT.runs.clear()
    yield
    TRANSCRIPT.runs.clear()


@pytest.fixture
def chaos_home(isolated_home: Path) -> Iterator[Path]:
    """An isolated HOME (see tests/conftest.py) whose local cloud is initialised."""
    from chaos_helpers import npa

    npa("local-cloud", "init", check=True)
    yield isolated_home
