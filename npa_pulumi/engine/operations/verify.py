"""`verify-mig`, `verify-graphics`, `verify-storage`, `verify-fabric`: the read-only verifiers of deployed
clusters (engine/verification/verifiers.py, engine/verification/fabric.py) as an operation like the others:
one request in (the verifier's timeout, where its exact evidence goes, `wait` and `reconcile` for MIG,
`reconcile` for graphics), a FleetResult out."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.requests import GraphicsVerifyRequest, MigVerifyRequest, VerifyRequest
from npa_pulumi.engine.verification.verifiers import VerifyOptions
from npa_pulumi.output.results import FleetResult


class Verifier(StrEnum):
    MIG = "verify-mig"
    GRAPHICS = "verify-graphics"
    STORAGE = "verify-storage"
    FABRIC = "verify-fabric"


# The default deadline of each verifier (a request's `timeout_s` overrides it): the fabric's benchmark
# needs every GPU node twice, so it gets longer.
DEFAULT_TIMEOUT_S: dict[Verifier, float] = {
    Verifier.MIG: 600.0,
    Verifier.GRAPHICS: 600.0,
    Verifier.STORAGE: 600.0,
    Verifier.FABRIC: 900.0,
}


def run(context: FleetContext, request: VerifyRequest, verifier: Verifier) -> FleetResult:
    mig = request if isinstance(request, MigVerifyRequest) else None
    graphics = request if isinstance(request, GraphicsVerifyRequest) else None
    if verifier is not Verifier.MIG and mig is not None and (mig.wait or mig.reconcile):
        raise TypeError(f"{verifier}: `wait` and `reconcile` are verify-mig's")
    if verifier is not Verifier.GRAPHICS and graphics is not None and graphics.reconcile:
        raise TypeError(f"{verifier}: a GraphicsVerifyRequest's `reconcile` is verify-graphics'")
    options = VerifyOptions(
        wait=bool(mig and mig.wait),
        reconcile=bool(mig and mig.reconcile) or bool(graphics and graphics.reconcile),
        timeout_s=request.timeout_s if request.timeout_s is not None else DEFAULT_TIMEOUT_S[verifier],
        poll_s=request.poll_s,
        evidence_dir=request.evidence_dir,
        concurrency=request.concurrency,
    )
    return _runner(verifier)(context, options)


def _runner(verifier: Verifier) -> Callable[[FleetContext, VerifyOptions], FleetResult]:
    from npa_pulumi.engine.verification import fabric as verify_fabric
    from npa_pulumi.engine.verification import verifiers as verify

    return {
        Verifier.MIG: verify.verify_mig,
        Verifier.GRAPHICS: verify.verify_graphics,
        Verifier.STORAGE: verify.verify_storage,
        Verifier.FABRIC: verify_fabric.verify_fabric,
    }[verifier]
