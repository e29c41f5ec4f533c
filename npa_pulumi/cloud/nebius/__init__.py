"""The `nebius` cloud adapter (official SDK). See adapter.py; configuration in settings.py.

Importing this package does not import the `nebius` SDK; the first API call does. Its names are loaded
on first use (PEP 562), so that a module of the package the local cloud's commands need too (`s3`, the
stdlib S3 client that reads an s3:// backend's files) does not bring the adapter, asyncio and the gRPC
client with it: every command's orchestrator imports that client (~0.1 s of CPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from npa_pulumi.runtime.lazy_names import lazy_names

if TYPE_CHECKING:
    from .adapter import NebiusCloud
    from .profile import Identity, ProfileError, resolve_identity
    from .settings import NebiusSettings, RetrySettings

_MODULE_OF = {
    "NebiusCloud": "adapter",
    "Identity": "profile",
    "ProfileError": "profile",
    "resolve_identity": "profile",
    "NebiusSettings": "settings",
    "RetrySettings": "settings",
}

__all__ = ["Identity", "NebiusCloud", "NebiusSettings", "ProfileError", "RetrySettings", "resolve_identity"]

__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF, globals())
