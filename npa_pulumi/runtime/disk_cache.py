"""A small per-user cache of facts that are slow to compute and fixed for a given input.

Every `npa-pulumi` command is a fresh process, and so is every engine plugin host, so an in-process memo
does not help across commands: a recipe's HCL surface costs ~1 s of CPU to parse, `pulumi version` and
`terraform version` ~0.3-0.6 s of wall time each, on every `up` and `destroy`. Entries live under
`<npa home>/cache/<namespace>/<key>.json`; the key must name everything the value depends on (a content
digest, a binary's size and mtime). The cache is an optimisation only: unreadable, corrupt or unwritable
entries are recomputed, never an error.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import cache_dir


def _root() -> Path:
    return cache_dir()


def cache_key(*parts: object) -> str:
    return hashlib.sha256("\0".join(str(p) for p in parts).encode()).hexdigest()[:32]


def load(namespace: str, key: str) -> Any | None:
    path = _root() / namespace / f"{key}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def store(namespace: str, key: str, value: Any) -> None:
    directory = _root() / namespace
    try:
        text = json.dumps(value, sort_keys=True)
        directory.mkdir(parents=True, exist_ok=True)
        write_atomically(directory / f"{key}.json", text)  # parallel writers of one key agree anyway
    except (OSError, TypeError, ValueError):
        pass


def binary_identity(binary: Path) -> str:
    """What a binary's cached facts depend on: where it really is, its size and modification time."""
    real = binary.resolve()
    st = real.stat()
    return f"{real}|{st.st_size}|{st.st_mtime_ns}"


def source_identity(*paths: Path) -> str:
    """A digest of source files whose logic a cached value came from (so edits invalidate it)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
