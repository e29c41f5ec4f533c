"""`~/.npa/config.yaml` (the original tool's configuration): tenant and region for specs that leave them
empty, read after the profile; a broken file is refused naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_pulumi.cloud.user_defaults import UserDefaults, user_config_path, user_defaults
from npa_pulumi.errors import UserInputError


def test_tenant_and_region_are_read(isolated_home: Path) -> None:
    path = user_config_path()
    assert path == isolated_home / ".npa" / "config.yaml"
    assert user_defaults() == UserDefaults()  # no file: nothing said
    path.parent.mkdir()
    path.write_text("tenant-id: tenant-e00abc\nregion: eu-north1\nother: kept\n")
    assert user_defaults() == UserDefaults(tenant_id="tenant-e00abc", region="eu-north1")
    path.write_text("tenant_id: ' tenant-e00def '\n")
    assert user_defaults() == UserDefaults(tenant_id="tenant-e00def")


@pytest.mark.parametrize("text", ["- a\n- b\n", "region: [unclosed\n"])
def test_a_broken_file_is_refused_naming_it(isolated_home: Path, text: str) -> None:
    path = user_config_path()
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(UserInputError, match=str(path)):
        user_defaults()
