"""How the command's provider host is served (`NPA_SHARED_PROVIDER_HOST`), and how an engine attaches."""

from __future__ import annotations

import pytest

from npa_pulumi.engine.automation import HostMode, host_mode
from npa_pulumi.engine.automation.provider_host import attach_value


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        (None, HostMode.IN_PROCESS),
        ("", HostMode.IN_PROCESS),
        ("1", HostMode.IN_PROCESS),
        ("process", HostMode.PROCESS),
        (" Process ", HostMode.PROCESS),
        ("0", HostMode.OFF),
        ("off", HostMode.OFF),
        ("false", HostMode.OFF),
    ],
)
def test_host_mode(value: str | None, mode: HostMode) -> None:
    environ = {} if value is None else {"NPA_SHARED_PROVIDER_HOST": value}
    assert host_mode(environ) is mode


def test_attach_value_keeps_the_users_own_providers() -> None:
    assert attach_value(4242, None) == "pulumi-python:4242"
    assert attach_value(4242, "kubernetes:7000") == "kubernetes:7000,pulumi-python:4242"
    assert attach_value(4242, "pulumi-python:9") == "pulumi-python:9"  # the user's own debugging host wins
