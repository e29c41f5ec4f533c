"""Shared fixtures: every test runs with a private HOME, npa home, local-cloud dir and terraform config,
so nothing touches the developer's real ~/.npa-pulumi, ~/.nebius or ~/.pulumi."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    tf_config = tmp_path / "terraformrc"
    tf_config.write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NPA_PULUMI_HOME", str(home / ".npa-pulumi"))
    monkeypatch.setenv("NPA_LOCAL_CLOUD_DIR", str(home / ".npa-pulumi" / "local-cloud"))
    monkeypatch.setenv("PULUMI_HOME", str(home / ".pulumi"))
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", str(tf_config))
    monkeypatch.setenv("CHECKPOINT_DISABLE", "1")
    for var in (
        "PULUMI_BACKEND_URL",
        "PULUMI_CONFIG_PASSPHRASE",
        "PULUMI_CONFIG_PASSPHRASE_FILE",
        "NEBIUS_IAM_TOKEN",
    ):
        monkeypatch.delenv(var, raising=False)
    yield home
