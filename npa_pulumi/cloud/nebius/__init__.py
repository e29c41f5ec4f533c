"""The `nebius` cloud adapter (official SDK). See adapter.py; configuration in settings.py.

Importing this package does not import the `nebius` SDK; the first API call does.
"""

from .adapter import NebiusCloud
from .profile import Identity, ProfileError, resolve_identity
from .settings import NebiusSettings, RetrySettings

__all__ = ["Identity", "NebiusCloud", "NebiusSettings", "ProfileError", "RetrySettings", "resolve_identity"]
