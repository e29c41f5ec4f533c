"""The copies of the original's recipes that adopted cluster stacks run until their recipe move:
`<npa home>/adopted-recipes/<stack>/` (engine/operations/adopt.py writes them).

An adopted stack plans, refreshes and destroys with its copy while its fingerprint carries
`+recipe-move-pending`. The copy is no longer used once the stack is gone (`destroy`) or once an `up` has
recorded the spec's own fingerprint (the move to the spec's recipe applied), and it is removed then: it is
npa-pulumi's own copy, never the original's install (which is only ever read).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from npa_pulumi.runtime.home import npa_home

DIRECTORY = "adopted-recipes"
# Marks an adopted cluster stack whose recipe is still the install's: its fingerprint is never the plan's,
# so `preview` previews it (the move to the spec's recipe, with Terraform's plan) and `up` applies it.
RECIPE_MOVE_PENDING = "+recipe-move-pending"


def path(stack: str) -> Path:
    """Where the adopted cluster stack `stack` keeps its copy of the install's recipe."""
    return npa_home() / DIRECTORY / stack


def moved(fingerprint: str | None) -> bool:
    """Whether a recorded fingerprint says the stack runs the spec's recipe (no move pending)."""
    return bool(fingerprint) and not str(fingerprint).endswith(RECIPE_MOVE_PENDING)


def remove(stack: str) -> bool:
    """Remove the stack's copy (True when there was one). A stack name is one path component, so nothing
    outside `adopted-recipes/` is ever touched."""
    if not stack or "/" in stack or stack in (".", ".."):
        return False
    copy = path(stack)
    if copy.is_symlink() or not copy.is_dir():
        return False
    shutil.rmtree(copy)
    return True
