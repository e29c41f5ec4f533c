"""The `local` cloud adapter: an embedded Nebius simulator persisted in SQLite.

`LocalCloud` implements the cloud port; `LocalSimulator` is the dict-level engine behind it, its services
over one store composed (simulator.py), also used by the machine-facing API `python -m
npa_pulumi.simulator.api` that soperator's stand-in recipe calls. Exports are resolved lazily so that API
does not pay for pydantic at import time. Only the simulator's entry points import it (`adapter.py`, the
`local` cloud adapter, and the `local-cloud` command in npa_pulumi/simulator_cli/).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from npa_pulumi.simulator.cloud import LocalCloud
    from npa_pulumi.simulator.simulator import LocalSimulator

__all__ = ["LocalCloud", "LocalSimulator"]


def __getattr__(name: str) -> Any:
    if name == "LocalCloud":
        from npa_pulumi.simulator.cloud import LocalCloud

        return LocalCloud
    if name == "LocalSimulator":
        from npa_pulumi.simulator.simulator import LocalSimulator

        return LocalSimulator
    raise AttributeError(name)
