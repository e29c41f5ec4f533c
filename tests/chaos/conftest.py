"""The fault campaign (issue 10): `make chaos-quick` (part of `make test`) and `make chaos` (long).

`NPA_CHAOS=quick|long` picks the budget (quick when unset): how many fuzzed specs, how many crash trials.
`NPA_CHAOS_SEED` replays a campaign: every random choice (kill points, fuzz seeds) derives from it, and
every failure message names it. In CI the seed derives from the commit (`campaign_seed`); the header of the
run prints it either way. Nothing here is timed: speed belongs to benchmarks/.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

CHAOS_MODE = os.environ.get("NPA_CHAOS", "quick").strip().lower() or "quick"
if CHAOS_MODE not in ("quick", "long"):
    raise pytest.UsageError(f"NPA_CHAOS must be quick or long, not {CHAOS_MODE!r}")
LONG = CHAOS_MODE == "long"


def campaign_seed(env: Mapping[str, str], head: Callable[[], str | None]) -> tuple[int, str]:
    """(seed, where it came from). `NPA_CHAOS_SEED` replays a campaign. In CI (`$CI` set) the seed derives
    from the commit under test (`$GITHUB_SHA`, else `git rev-parse HEAD`), so a failure there replays from
    the commit alone and a re-run of one commit explores the same campaign; elsewhere every run explores a
    new one."""
    if env.get("NPA_CHAOS_SEED"):
        return int(env["NPA_CHAOS_SEED"]), "NPA_CHAOS_SEED"
    if env.get("CI", "").strip().lower() not in ("", "0", "false"):
        commit = env.get("GITHUB_SHA") or head()
        if commit:
            return int(commit[:8], 16) % (2**31 - 1) + 1, f"commit {commit[:12]}"
    return random.SystemRandom().randrange(1, 2**31), "random"


def _git_head() -> str | None:
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


SEED, SEED_SOURCE = campaign_seed(os.environ, _git_head)
# One campaign across pytest-xdist workers: this conftest is loaded by the controller first (tests/chaos is
# the run's argument), and the workers it starts inherit its environment, so they replay its seed instead
# of drawing their own; the header (printed by the controller) still names where the seed came from.
os.environ.setdefault("NPA_CHAOS_SEED", str(SEED))


def budget(quick: int, long: int) -> int:
    return long if LONG else quick


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: the fault campaign (tests/chaos), quick or long by NPA_CHAOS")


def pytest_report_header(config: pytest.Config) -> str:
    replay = f"replay with NPA_CHAOS_SEED={SEED}"
    return f"chaos campaign: mode={CHAOS_MODE} seed={SEED} from {SEED_SOURCE} ({replay})"


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
