"""Where the adapter's gRPC calls and S3 probes go.

Nebius serves EU regions from `api.eu.nebius.cloud` and every other region from `api.nebius.cloud`
(the fleet tool learned this the hard way: a recipe pointed at the wrong domain fails late). The SDK
resolves each service to `<service>.<domain>`; an explicit endpoint instead routes *every* service to one
address, which is how a gateway, a proxy or the loopback test fake is reached.
"""

from __future__ import annotations

from dataclasses import dataclass

from .profile import Identity
from .settings import NebiusSettings

GLOBAL_DOMAIN = "api.nebius.cloud"
EU_DOMAIN = "api.eu.nebius.cloud"
PUBLIC_DOMAINS = frozenset({GLOBAL_DOMAIN, EU_DOMAIN})


def domain_for_region(region: str) -> str:
    return EU_DOMAIN if region.lower().startswith("eu") else GLOBAL_DOMAIN


def with_port(address: str, default_port: int = 443) -> str:
    """`host` -> `host:443`; `host:port` and `[v6]:port` are kept."""
    address = address.strip()
    if address.startswith("["):
        return address if "]:" in address else f"{address}:{default_port}"
    return address if ":" in address else f"{address}:{default_port}"


def _bare_host(address: str) -> str:
    host = address.split("://", 1)[-1]
    return host.rsplit(":", 1)[0] if ":" in host else host


@dataclass(frozen=True)
class Route:
    """`constant` set: every service goes to that host:port. Otherwise `<service>.<domain>`."""

    domain: str
    constant: str | None = None

    def describe(self) -> str:
        return self.constant or self.domain


def resolve_route(settings: NebiusSettings, identity: Identity) -> Route:
    if settings.endpoint:
        address = with_port(settings.endpoint)
        return Route(domain=address, constant=address)
    if settings.domain:
        return Route(domain=with_port(settings.domain))
    profile_endpoint = identity.profile_endpoint
    # A profile aimed at a private installation keeps its endpoint; one aimed at either public domain
    # is re-aimed by region, because profiles are shared across fleets in different regions.
    if profile_endpoint and _bare_host(profile_endpoint) not in PUBLIC_DOMAINS:
        return Route(domain=with_port(profile_endpoint))
    if settings.region:
        return Route(domain=with_port(domain_for_region(settings.region)))
    return Route(domain=with_port(profile_endpoint or GLOBAL_DOMAIN))


def storage_endpoint(settings: NebiusSettings, region: str) -> str:
    """Base URL of the S3-compatible object storage serving `region`."""
    if settings.storage_endpoint:
        return settings.storage_endpoint.rstrip("/")
    return f"https://storage.{region}.nebius.cloud"
