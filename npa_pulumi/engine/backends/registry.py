"""Which backends this version deploys: for each kind of the backend vocabulary (spec.constants.BackendKind),
the package of that name beside this module, which exports its `BACKEND` (a `base.ClusterBackend`). A
target whose backend is not here is planned and validated but not deployable: `up` fails it
(not-deployable), preview/status/destroy list it as not-supported. A new backend is a kind in the
vocabulary and a folder of that name implementing the interface; nothing else names it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, cast

from npa_pulumi.engine.backends.base import ClusterBackend
from npa_pulumi.output.stack_outputs import ClusterOutputs
from npa_pulumi.spec.constants import BackendKind


def _load(kind: BackendKind) -> ClusterBackend | None:
    name = f"{__package__}.{kind.value}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name != name:
            raise  # the backend is there, something it needs is not
        return None
    return cast(ClusterBackend, module.BACKEND)


BACKENDS: dict[BackendKind, ClusterBackend] = {
    kind: backend for kind in BackendKind if (backend := _load(kind)) is not None
}


def backend_for(kind: str) -> ClusterBackend | None:
    """The backend that deploys `kind` targets, or None when this version deploys none."""
    known = BackendKind.parse(kind)
    return None if known is None else BACKENDS.get(known)


def recorded_backend(outputs: Mapping[str, Any] | None) -> ClusterBackend | None:
    """The backend a cluster stack was deployed by, as it recorded itself (ClusterOutputs.kind)."""
    kind = ClusterOutputs.read(outputs).kind
    return None if kind is None else BACKENDS.get(kind)


def kinds_where(holds: Callable[[ClusterBackend], bool]) -> list[BackendKind]:
    """The deployable kinds whose backend `holds`, in the vocabulary's order (for messages naming them)."""
    return [kind for kind, backend in BACKENDS.items() if holds(backend)]
