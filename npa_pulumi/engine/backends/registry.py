"""Which backends this version deploys. A target whose backend is not here is planned and validated but
not deployable: `up` fails it (not-deployable), preview/status/destroy list it as not-supported. A new
backend is a module beside `mk8s.py` implementing `base.ClusterBackend`, registered here."""

from __future__ import annotations

from npa_pulumi.engine.backends.base import BackendKind, ClusterBackend
from npa_pulumi.engine.backends.mk8s import Mk8sBackend
from npa_pulumi.engine.backends.soperator import SoperatorBackend

BACKENDS: dict[BackendKind, ClusterBackend] = {
    BackendKind.MK8S: Mk8sBackend(),
    BackendKind.SOPERATOR: SoperatorBackend(),
}


def backend_for(kind: str) -> ClusterBackend | None:
    """The backend that deploys `kind` targets, or None when this version deploys none."""
    try:
        return BACKENDS.get(BackendKind(kind))
    except ValueError:
        return None
