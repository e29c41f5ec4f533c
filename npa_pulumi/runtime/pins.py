"""The toolchain pins the package reads, from the one file that writes them.

tools/pins.toml pins every toolchain version (the engine, the providers, terraform, Kubernetes, kwok, the
operators); `make tools` builds from it (tools/toolchainlib). The package reads the same file, shipped as
npa_pulumi/data/pins.toml: in a checkout a link to tools/pins.toml, in a wheel a copy of it. Read on first
use: most processes never need a pin, and tomllib is an import worth saving.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

PINS_FILE = Path(__file__).parent.parent / "data" / "pins.toml"


@functools.cache
def _pins() -> dict[str, Any]:
    import tomllib

    with PINS_FILE.open("rb") as handle:
        return tomllib.load(handle)


def pin(tool: str, key: str = "version") -> str:
    """`[tool] key` of tools/pins.toml."""
    value = _pins().get(tool, {}).get(key)
    if not isinstance(value, str):
        raise LookupError(f"{PINS_FILE} pins no [{tool}] {key}")
    return value


def kuberay_operator_image() -> str:
    """The KubeRay operator's image: the release `make tools` builds the local cloud's operator from."""
    return pin("kuberay", "image")
