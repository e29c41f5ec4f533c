"""Deletes complete asynchronously in a real cloud: a delete call that returned is not yet proof of
absence; NotFound (or absence from its list) is. Callers that must know an object is gone (before deleting
its parent, before calling a phase done) wait for it here, bounded."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from npa_pulumi.cloud.errors import NotFound

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort

# How long a delete may take to show as absence (the cloud completes deletes asynchronously).
ABSENCE_TIMEOUT_S = 180.0


class NotYetGone(Exception):
    """A deleted object still shows after ABSENCE_TIMEOUT_S: the phase failed, a retry continues it."""


def wait_gone(present: Callable[[], bool], what: str, timeout_s: float = ABSENCE_TIMEOUT_S) -> None:
    """NotFound (or absence from its list) is the verified absence; a delete that returned is not proof
    yet. Poll, with backoff, until the object is gone."""
    deadline = time.monotonic() + timeout_s
    delay = 0.2
    while present():
        if time.monotonic() >= deadline:
            raise NotYetGone(f"{what} is still present {timeout_s:g} s after its delete; retry to continue")
        time.sleep(delay)
        delay = min(delay * 2, 3.0)


def found(get: Callable[[], object]) -> Callable[[], bool]:
    """`present` for wait_gone from a getter that raises NotFound once the object is gone."""

    def present() -> bool:
        try:
            get()
        except NotFound:
            return False
        return True

    return present


def delete_subnet(cloud: CloudPort, subnet_id: str) -> None:
    """Delete (already gone counts as deleted) and wait until it is gone: its network's delete needs that."""
    with contextlib.suppress(NotFound):
        cloud.delete_subnet(subnet_id)
    wait_gone(found(lambda: cloud.get_subnet(subnet_id)), f"subnet {subnet_id}")


def delete_network(cloud: CloudPort, network_id: str) -> None:
    with contextlib.suppress(NotFound):
        cloud.delete_network(network_id)
    wait_gone(found(lambda: cloud.get_network(network_id)), f"network {network_id}")
