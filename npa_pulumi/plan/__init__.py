"""Offline planning: targets with effective values, the plan document, and k8s-training tfvars."""

from npa_pulumi.plan.document import plan_document
from npa_pulumi.plan.recipe_surface import (
    IDENTITY_VARIABLES,
    MIG_RECIPE_VARIABLES,
    RECIPE_VARIABLES,
    RUNTIME_VARIABLES,
    RecipeError,
    default_recipe_variables,
    read_recipe_variables,
    shipped_recipe_dir,
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
    "default_recipe_variables",
    "plan_document",
    "read_recipe_variables",
    "render_plan_text",
    "render_tfvars",
    "resolve_cluster",
    "resolve_targets",
    "shipped_recipe_dir",
]
