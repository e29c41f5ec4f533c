"""Offline planning: targets with effective values, the plan document, and k8s-training tfvars.

The names below are loaded on first use (PEP 562): the dynamic-provider host needs only the recipe's
variable surface (`plan.recipe_surface`, through the bridge), and importing this package eagerly loaded
the plan document with its cost model, price table, the spec's models and rich (~0.45 s of CPU per
command's host).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from npa_pulumi.runtime.lazy_names import lazy_names

if TYPE_CHECKING:
    from npa_pulumi.plan.document import plan_document
    from npa_pulumi.plan.recipe_surface import (
        IDENTITY_VARIABLES,
        MIG_RECIPE_VARIABLES,
        RECIPE_VARIABLES,
        RUNTIME_VARIABLES,
        RecipeError,
        read_recipe_variables,
    )
    from npa_pulumi.plan.targets import (
        ResolvedCluster,
        ResolvedHealth,
        ResolvedKubeRay,
        ResolvedMig,
        ResolvedObjectStorage,
        ResolvedPool,
        SelectorError,
        Target,
        resolve_cluster,
        resolve_targets,
    )
    from npa_pulumi.plan.text import render_plan_text
    from npa_pulumi.plan.tfvars import RenderedTfvars, render_tfvars

_MODULE_OF = {
    "IDENTITY_VARIABLES": "recipe_surface",
    "MIG_RECIPE_VARIABLES": "recipe_surface",
    "RECIPE_VARIABLES": "recipe_surface",
    "RUNTIME_VARIABLES": "recipe_surface",
    "RecipeError": "recipe_surface",
    "RenderedTfvars": "tfvars",
    "ResolvedCluster": "targets",
    "ResolvedHealth": "targets",
    "ResolvedKubeRay": "targets",
    "ResolvedMig": "targets",
    "ResolvedObjectStorage": "targets",
    "ResolvedPool": "targets",
    "SelectorError": "targets",
    "Target": "targets",
    "plan_document": "document",
    "read_recipe_variables": "recipe_surface",
    "render_plan_text": "text",
    "render_tfvars": "tfvars",
    "resolve_cluster": "targets",
    "resolve_targets": "targets",
}

__all__ = [
    "IDENTITY_VARIABLES",
    "MIG_RECIPE_VARIABLES",
    "RECIPE_VARIABLES",
    "RUNTIME_VARIABLES",
    "RecipeError",
    "RenderedTfvars",
    "ResolvedCluster",
    "ResolvedHealth",
    "ResolvedKubeRay",
    "ResolvedMig",
    "ResolvedObjectStorage",
    "ResolvedPool",
    "SelectorError",
    "Target",
    "plan_document",
    "read_recipe_variables",
    "render_plan_text",
    "render_tfvars",
    "resolve_cluster",
    "resolve_targets",
]

__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF, globals())
