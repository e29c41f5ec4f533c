"""The engine always gets an absolute file:// backend: npa-pulumi expands `~` from $HOME, the engine would
expand it from the user database, and where the two differ (CI containers, `sudo -E`, test harnesses)
they would read and write different state directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_pulumi.engine.automation.workspace import (
    DEFAULT_BACKEND_URL,
    EngineSettings,
    engine_backend_url,
    resolve_backend_url,
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("NPA_PULUMI_HOME", raising=False)
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    return home


def test_default_backend_is_absolute_under_home(home: Path) -> None:
    url = resolve_backend_url()
    assert url == f"file://{home}/.npa-pulumi/state"
    assert (home / ".npa-pulumi" / "state").is_dir()


def test_tilde_in_flag_and_env_is_expanded(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_backend_url("file://~/team-state") == f"file://{home}/team-state"
    monkeypatch.setenv("PULUMI_BACKEND_URL", DEFAULT_BACKEND_URL)
    assert resolve_backend_url() == f"file://{home}/.npa-pulumi/state"


def test_relative_path_is_made_absolute(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The engine runs in npa-pulumi's workspace dir: a relative path would land somewhere else there.
    monkeypatch.chdir(tmp_path)
    assert resolve_backend_url("file://./rel-state") == f"file://{tmp_path}/rel-state"
    assert (tmp_path / "rel-state").is_dir()


def test_query_is_kept(home: Path) -> None:
    assert resolve_backend_url("file://~/s?no_tmp_dir=true") == f"file://{home}/s?no_tmp_dir=true"


def test_npa_pulumi_home_still_moves_the_default(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(home / "elsewhere"))
    assert resolve_backend_url() == f"file://{home}/elsewhere/state"


def test_other_backends_are_untouched(home: Path) -> None:
    assert resolve_backend_url("s3://bucket/path?region=x") == "s3://bucket/path?region=x"


def test_the_engines_open_a_file_backend_without_sidecars() -> None:
    # gocloud's fileblob rewrites a `.attrs` sidecar in place on each write: a concurrent read gets EOF.
    assert engine_backend_url("file:///s") == "file:///s?metadata=skip"
    assert engine_backend_url("file:///s?no_tmp_dir=true") == "file:///s?no_tmp_dir=true&metadata=skip"
    # the user's own choice stands
    assert engine_backend_url("file:///s?metadata=") == "file:///s?metadata="
    assert engine_backend_url("s3://bucket/path?region=x") == "s3://bucket/path?region=x"


@pytest.mark.integration  # env() resolves the built engine
def test_the_engine_env_carries_the_engine_url(home: Path) -> None:
    settings = EngineSettings.resolve(backend="file://~/team-state")
    assert settings.backend_url == f"file://{home}/team-state"  # what npa-pulumi shows and reads
    assert settings.env()["PULUMI_BACKEND_URL"] == f"file://{home}/team-state?metadata=skip"
