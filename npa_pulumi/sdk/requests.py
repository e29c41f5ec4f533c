"""What an SDK caller (and the CLI, which is one) asks an operation: one typed request per operation.

    selection = Selection(projects=("research",), shard="1/4", stage="clusters")
    result = deploy("fleet.yaml", UpRequest(selection=selection, where=Where(cloud="local"), concurrency=8))

The request types are the engine's own (npa_pulumi/engine/requests.py), re-exported here: each is composed
of small parts (the selection, where the fleet lives, the recipes, the operation's own settings) and checks
itself when it is made, before any spec is read or anything runs.
"""

from __future__ import annotations

from npa_pulumi.engine.requests import (
    DEFAULT_CONCURRENCY,
    AdoptRequest,
    CleanupRequest,
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
from npa_pulumi.spec.constants import BackendKind

__all__ = [
    "DEFAULT_CONCURRENCY",
    "AdoptRequest",
    "BackendKind",
    "CleanupRequest",
    "DestroyRequest",
    "FleetRequest",
    "GraphicsVerifyRequest",
    "HealthRequest",
    "HealthWatch",
    "LocalCleanupRequest",
    "MigVerifyRequest",
    "Policies",
    "PreviewRequest",
    "ReceiptDestroyRequest",
    "RecipeChoice",
    "Recipes",
    "RefreshRequest",
    "Rollout",
    "Selection",
    "Stage",
    "StatusRequest",
    "TeardownOptions",
    "UpRequest",
    "VerifyRequest",
    "Where",
]
