"""One entry point for both adapters, so callers never import an adapter module themselves.

The Nebius adapter lives here (`cloud/nebius/`); the local simulator is a package of its own above this
layer (`npa_pulumi/simulator/`), found through the `npa_pulumi.clouds` entry-point group that it registers
(pyproject.toml), so the cloud layer and everything that uses it stay free of it.
"""

from __future__ import annotations

import functools
import urllib.parse
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any, Literal

from npa_pulumi.errors import NpaError

from .port import CloudPort

CloudKind = Literal["local", "nebius"]

# The tenant a fleet runs in, for adapters made in the engine's provider process (the dynamic providers):
# the orchestrator puts it in the engine's environment.
TENANT_ENV = "NPA_TENANT_ID"
# ... and how it authenticates, when a flag rather than the environment chose it (`--auth federated`): the
# Nebius settings' own variable, which the adapter reads wherever it is made.
AUTH_ENV = "NPA_NEBIUS_AUTH"


def make_cloud(
    kind: CloudKind, *, profile: str | None = None, region: str | None = None, **options: Any
) -> CloudPort:
    """Build the adapter named by `kind`.

    `nebius`: `profile` (the explicit `--profile`/spec profile) and `region` (picks the API domain) plus
    any `NebiusSettings` field as an option (`tenant_id`, `endpoint`, `insecure`, `ca_file`, ...);
    unset options fall back to the `NPA_NEBIUS_*` environment (see `nebius/settings.py`).
    `local`: options go to `LocalCloud` unchanged (e.g. `directory`); `profile` and `region` mean nothing
    to the embedded simulator and are ignored.
    Adapters are imported lazily: the one not chosen is never loaded.
    """
    if kind == "nebius":
        from .nebius import NebiusCloud, NebiusSettings

        settings = NebiusSettings.from_options({"profile": profile, "region": region, **options})
        return NebiusCloud(settings)
    if kind == "local":
        cloud: CloudPort = adapter("local").make(**options)
        return cloud
    raise ValueError(f"unknown cloud kind {kind!r} (expected 'local' or 'nebius')")


def ensure_backend_served(url: str) -> None:
    """A backend URL whose S3 endpoint is the local cloud's own server (`backend init --cloud local`):
    that server must run before the engine (or npa-pulumi's own reads) use the URL; started here, on the
    port the URL names, if it does not (a reset or a reboot stopped it). Any other URL is left alone, and
    nothing of the local cloud is loaded for it."""
    endpoint = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query)).get("endpoint", "")
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    if not endpoint.startswith("http://") or not (host == "localhost" or host.startswith("127.")):
        return  # only the local cloud serves plain HTTP on loopback for npa-pulumi
    adapter("local").ensure_backend_served(url)


ADAPTER_GROUP = "npa_pulumi.clouds"


@functools.cache
def adapter(kind: str) -> ModuleType:
    """The module registered as cloud adapter `kind` in the `npa_pulumi.clouds` entry-point group."""
    found = entry_points(group=ADAPTER_GROUP, name=kind)
    if not found:
        raise NpaError(
            f"no {kind!r} cloud adapter is installed (entry point group {ADAPTER_GROUP}); reinstall "
            "npa-pulumi (`make venv`, or `pip install npa-pulumi`)"
        )
    module: ModuleType = next(iter(found)).load()
    return module
