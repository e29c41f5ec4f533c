"""tools/pins.toml: the one place where the toolchain's versions are written. The package reads the same
file (npa_pulumi/runtime/pins.py, through npa_pulumi/data/pins.toml, a link to it)."""

from __future__ import annotations

import tomllib
from typing import Any

from .common import REPO

PINS_FILE = REPO / "tools" / "pins.toml"

Pins = dict[str, Any]  # tools/pins.toml, one table per tool


def load_pins() -> Pins:
    with PINS_FILE.open("rb") as handle:
        return tomllib.load(handle)
