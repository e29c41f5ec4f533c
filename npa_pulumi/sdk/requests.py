"""What an SDK caller (and the CLI, which is one) asks an operation: one typed request per operation.

    selection = Selection(projects=("research",), shard="1/4", stage="clusters")
    result = deploy("fleet.yaml", UpRequest(selection=selection, where=Where(cloud="local"), concurrency=8))

The request types are the engine's own (npa_pulumi/engine/requests.py), re-exported here: each is composed
of small parts (the selection, where the fleet lives, the recipes, the operation's own settings) and checks
itself when it is made, before any spec is read or anything runs.

What a run leaves to do again comes back the same way: a `Retry` (npa_pulumi/engine/retries.py) is an
`Operation` and the request that does it again, on `StackResult.retry`, `TeardownPhase.retry` and
`FleetResult.resume`: `deploy(retry.spec_path, retry.request)` runs it. Its text (`retry_command`,
`resume_command`, and what the run stores for `status` elsewhere) is what the operation's `render_retry`
spells; without one, the neutral `describe` form (the CLI passes its command-line renderer).
"""

from __future__ import annotations

from npa_pulumi.engine.requests import (
    DEFAULT_CONCURRENCY,
    AdoptRequest,
    AttestRequest,
    CleanupRequest,
    ClusterProof,
    DestroyRequest,
    FleetRequest,
    GraphicsVerifyRequest,
    HealthRequest,
    HealthWatch,
    LocalCleanupRequest,
    MigVerifyRequest,
    Policies,
    PreviewRequest,
    ReceiptDestroyRequest,
    RecipeChoice,
    Recipes,
    RefreshRequest,
    Rollout,
    Selection,
    Stage,
    StatusRequest,
    TeardownOptions,
    UpRequest,
    VerifyRequest,
    Where,
)
from npa_pulumi.engine.retries import Operation, RenderRetry, Retry, RetryRequest, describe
from npa_pulumi.spec.constants import BackendKind

__all__ = [
    "DEFAULT_CONCURRENCY",
    "AdoptRequest",
    "AttestRequest",
    "BackendKind",
    "CleanupRequest",
    "ClusterProof",
    "DestroyRequest",
    "FleetRequest",
    "GraphicsVerifyRequest",
    "HealthRequest",
    "HealthWatch",
    "LocalCleanupRequest",
    "MigVerifyRequest",
    "Operation",
    "Policies",
    "PreviewRequest",
    "ReceiptDestroyRequest",
    "RecipeChoice",
    "Recipes",
    "RefreshRequest",
    "RenderRetry",
    "Retry",
    "RetryRequest",
    "Rollout",
    "Selection",
    "Stage",
    "StatusRequest",
    "TeardownOptions",
    "UpRequest",
    "VerifyRequest",
    "Where",
    "describe",
]
