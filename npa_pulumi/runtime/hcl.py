"""Parsing HCL text with python-hcl2, safely from many threads.

python-hcl2 (8.x) serializes its parse tree with a `SerializationContext` that is a mutable default
argument shared by every call: a thread inside an interpolation flips `inside_dollar_string` for all the
others, so a block another thread is serializing at that moment comes back as a `${...}` string instead of
an object. The shared plugin host prepares several stacks' recipes at once, so every parse in the product
goes through this one lock.
"""

from __future__ import annotations

import threading
from typing import Any

_PARSE_LOCK = threading.Lock()


def loads(text: str) -> dict[str, Any]:
    """`hcl2.loads(text)`, one call at a time in this process. Raises what python-hcl2 raises (lark's
    exceptions on malformed HCL)."""
    import hcl2  # local: only reading recipes and installs parses HCL

    with _PARSE_LOCK:
        document: dict[str, Any] = hcl2.loads(text)
    return document
