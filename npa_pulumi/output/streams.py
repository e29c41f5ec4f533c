"""Where output goes: exactly one JSON document, or text reports, on stdout; everything else on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console


def stdout_console() -> Console:
    """The console for text reports on stdout: wide tables when piped into a file or a CI log, where
    rich would otherwise squeeze them into 80 columns."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else 160)


def emit_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()
