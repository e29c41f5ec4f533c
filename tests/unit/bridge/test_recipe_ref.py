"""`--recipe-ref REF`: a branch is re-resolved on every run, a tag or a commit may be served from the cache,
and a commit SHA is accepted. The "upstream" here is a local git repository (no network)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from npa_pulumi.bridge.recipe import RecipeError, materialize, pin_source, resolve_source


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
            "HOME": str(repo.parent),
            "PATH": "/usr/bin:/bin:/usr/local/bin",
        },
    )
    return proc.stdout.strip()


def commit(repo: Path, marker: str) -> str:
    (repo / "k8s-training" / "main.tf").write_text(f'locals {{ marker = "{marker}" }}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", marker)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = tmp_path / "library"
    (repo / "k8s-training").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    monkeypatch.setenv("NPA_RECIPE_REPO_URL", str(repo))
    monkeypatch.delenv("NPA_K8S_TRAINING_DIR", raising=False)
    return repo


def checkout_marker(ref: str, tmp_path: Path, run: str) -> str:
    """What one run (planning, then the bridge) materializes for `--recipe-ref ref`."""
    source = pin_source(resolve_source("nebius", None, ref), tmp_path / "cache")
    recipe = materialize(source, tmp_path / "work" / run, "us-central1", tmp_path / "cache")
    return (recipe.module_dir / "main.tf").read_text()


def test_a_branch_is_re_resolved_on_every_run(upstream: Path, tmp_path: Path) -> None:
    commit(upstream, "one")
    assert '"one"' in checkout_marker("main", tmp_path, "run1")
    commit(upstream, "two")
    assert '"two"' in checkout_marker("main", tmp_path, "run2")


def test_a_branch_is_pinned_to_one_commit_for_the_whole_run(upstream: Path, tmp_path: Path) -> None:
    first = commit(upstream, "one")
    source = pin_source(resolve_source("nebius", None, "main"), tmp_path / "cache")
    assert source.location == f"{upstream}@{first}"
    commit(upstream, "two")  # the branch moves while the run is under way
    recipe = materialize(source, tmp_path / "work", "us-central1", tmp_path / "cache")
    assert '"one"' in (recipe.module_dir / "main.tf").read_text()


def test_a_commit_sha_is_accepted(upstream: Path, tmp_path: Path) -> None:
    first = commit(upstream, "one")
    commit(upstream, "two")
    assert '"one"' in checkout_marker(first, tmp_path, "run1")


def test_a_tag_is_served_from_the_cache(upstream: Path, tmp_path: Path) -> None:
    commit(upstream, "one")
    git(upstream, "tag", "v1")
    assert '"one"' in checkout_marker("v1", tmp_path, "run1")
    commit(upstream, "two")
    git(upstream, "tag", "-f", "v1")  # a moved tag is not looked up again
    assert '"one"' in checkout_marker("v1", tmp_path, "run2")


def test_an_unknown_ref_is_a_clear_error(upstream: Path, tmp_path: Path) -> None:
    commit(upstream, "one")
    with pytest.raises(RecipeError, match="no-such-branch") as caught:
        checkout_marker("no-such-branch", tmp_path, "run1")
    assert caught.value.exit_code == 2  # invalid input, not a failed operation
    with pytest.raises(RecipeError, match="full 40-character"):
        checkout_marker("abc1234", tmp_path, "run1")
