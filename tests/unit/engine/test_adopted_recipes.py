"""The adopted recipe copy (`<npa home>/adopted-recipes/<stack>`, engine/registrations/adopted_recipes.py)
goes when it is no longer used: once an `up` recorded the spec's fingerprint (the recipe move applied), and
when the stack is destroyed; while the move is pending it stays."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from npa_pulumi.engine.operations.up import _forget_adopted_recipe
from npa_pulumi.engine.registrations import adopted_recipes
from npa_pulumi.output.results import StackResult

STACK = "takeover.alpha.train"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _copy(stack: str = STACK) -> Path:
    copy = adopted_recipes.path(stack)
    (copy / "k8s-training").mkdir(parents=True)
    (copy / "k8s-training" / "main.tf").write_text("# the install's recipe\n")
    return copy


def test_the_copy_lives_under_the_npa_home(home: Path) -> None:
    assert adopted_recipes.path(STACK) == home / "adopted-recipes" / STACK


def test_remove_takes_only_that_stacks_copy(home: Path) -> None:
    mine, other = _copy(), _copy("takeover.alpha.other")
    assert adopted_recipes.remove(STACK) is True
    assert not mine.exists() and other.exists()
    assert adopted_recipes.remove(STACK) is False  # nothing left: nothing to do
    for odd in ("", ".", "..", "../takeover.alpha.other", "a/b"):
        assert adopted_recipes.remove(odd) is False
    assert other.exists()
    link = adopted_recipes.path("linked")
    link.symlink_to(other)
    assert adopted_recipes.remove("linked") is False and other.exists()


def test_moved_reads_the_recorded_fingerprint() -> None:
    assert adopted_recipes.moved("abc123")
    assert not adopted_recipes.moved("abc123" + adopted_recipes.RECIPE_MOVE_PENDING)
    assert not adopted_recipes.moved(None) and not adopted_recipes.moved("")


def _up(fingerprint: str | None, cached: dict[str, Any] | None = None) -> list[str]:
    said: list[str] = []
    context: Any = SimpleNamespace(
        cached_outputs=lambda stack: cached, progress=SimpleNamespace(message=said.append)
    )
    result = StackResult(
        stack=STACK,
        kind="cluster",
        project_key="alpha",
        status="deployed",
        outputs={"npa_fingerprint": fingerprint},
    )
    op: Any = SimpleNamespace(stack=STACK)
    _forget_adopted_recipe(context, op, result)
    return said


def test_an_up_that_recorded_the_specs_fingerprint_removes_the_copy(home: Path) -> None:
    copy = _copy()
    assert _up("abc123" + adopted_recipes.RECIPE_MOVE_PENDING) == [] and copy.exists()  # still pending
    (said,) = _up("abc123")
    assert not copy.exists() and "recipe move is applied" in said
    assert _up("abc123") == []  # a stack never adopted, or already moved: nothing to say
