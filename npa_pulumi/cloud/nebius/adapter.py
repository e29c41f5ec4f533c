"""The `nebius` adapter: the cloud port on the official `nebius` Python SDK.

The SDK (and its ~2 s of generated API modules) is imported on first use, service module by service
module, so `import npa_pulumi.cloud` stays cheap and nothing here runs until a method is called.

Every call goes through the SDK's real client stack: its channel, resolver, credentials (a
`~/.nebius/config.yaml` profile, a service-account credentials file, or an explicitly allowed
`NEBIUS_IAM_TOKEN`), its idempotency-key interceptor and its operation wrapper. What the adapter adds:

* identity resolution before any RPC (profile pinning, tenant from that profile, stale-token stripping;
  see `profile.py`), and the API domain by region (see `endpoints.py`);
* one retry policy for everything (see `retry.py`); the SDK's per-request retries are off;
* listing paged to completion; operations waited to completion within the caller's timeout;
* typed errors that keep the request they came from (see `errmap.py`); records normalised as the port
  describes (see `convert.py`).

Choices of API version: projects use `nebius.iam.v1.ProjectService` (deprecated for v2, but only v1
reports a project's suspension state, which preflight must check); access keys use
`nebius.iam.v2.AccessKeyService` with `SecretDeliveryMode.EXPLICIT` (secret fetched once via GetSecret).

The adapter is one class of parts, one module each: `client.py` (the plumbing every part shares),
`projects.py`, `storage.py` and `kubernetes.py` (the port's methods by service).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .kubernetes import KubernetesAndCompute
from .maintenance import Maintenance
from .projects import ProjectsAndNetworks
from .settings import NebiusSettings
from .storage import StorageAndAccess


class NebiusCloud(ProjectsAndNetworks, StorageAndAccess, KubernetesAndCompute, Maintenance):
    """The cloud port against the real Nebius API. Thread-safe; close() when done."""

    def __enter__(self) -> NebiusCloud:
        return self


@contextmanager
def opened(settings: NebiusSettings | None = None) -> Iterator[NebiusCloud]:
    """`with opened(settings) as cloud:` closes the SDK's channels and threads afterwards."""
    cloud = NebiusCloud(settings)
    try:
        yield cloud
    finally:
        cloud.close()
