"""Region -> API domain, endpoint overrides and storage endpoints of the `nebius` adapter."""

from __future__ import annotations

import pytest

from npa_pulumi.cloud.nebius.endpoints import domain_for_region, resolve_route, storage_endpoint, with_port
from npa_pulumi.cloud.nebius.profile import Identity
from npa_pulumi.cloud.nebius.settings import NebiusSettings


def identity(endpoint: str = "") -> Identity:
    return Identity("profile", "p", "tenant-a", None, None, endpoint, "X", True)


@pytest.mark.parametrize(
    ("region", "domain"),
    [
        ("eu-north1", "api.eu.nebius.cloud"),
        ("eu-west1", "api.eu.nebius.cloud"),
        ("us-central1", "api.nebius.cloud"),
        ("me-west1", "api.nebius.cloud"),
    ],
)
def test_domain_by_region(region: str, domain: str) -> None:
    assert domain_for_region(region) == domain


def test_region_re_aims_a_public_profile_endpoint() -> None:
    route = resolve_route(NebiusSettings(region="eu-north1"), identity("api.nebius.cloud"))
    assert route == resolve_route(NebiusSettings(region="eu-north1"), identity())
    assert (route.domain, route.constant) == ("api.eu.nebius.cloud:443", None)
    assert resolve_route(NebiusSettings(region="us-central1"), identity("api.eu.nebius.cloud")).domain == (
        "api.nebius.cloud:443"
    )


def test_a_private_profile_endpoint_is_kept() -> None:
    route = resolve_route(NebiusSettings(region="eu-north1"), identity("api.private.example:8443"))
    assert route.domain == "api.private.example:8443"


def test_explicit_endpoint_routes_every_service_to_one_address() -> None:
    route = resolve_route(NebiusSettings(endpoint="127.0.0.1:5555", region="eu-north1"), identity())
    assert (route.domain, route.constant) == ("127.0.0.1:5555", "127.0.0.1:5555")
    assert resolve_route(NebiusSettings(domain="api.test"), identity()).domain == "api.test:443"


def test_no_region_no_profile_endpoint_is_the_global_domain() -> None:
    assert resolve_route(NebiusSettings(), identity()).domain == "api.nebius.cloud:443"


def test_with_port() -> None:
    assert with_port("h") == "h:443"
    assert with_port("h:1") == "h:1"
    assert with_port("[::1]") == "[::1]:443"
    assert with_port("[::1]:9") == "[::1]:9"


def test_storage_endpoint() -> None:
    assert storage_endpoint(NebiusSettings(), "eu-north1") == "https://storage.eu-north1.nebius.cloud"
    assert (
        storage_endpoint(NebiusSettings(storage_endpoint="http://127.0.0.1:9/"), "x") == "http://127.0.0.1:9"
    )


def test_env_configures_routing() -> None:
    s = NebiusSettings.from_options(
        {"region": "eu-north1"},
        env={
            "NPA_NEBIUS_ENDPOINT": "127.0.0.1:1",
            "NPA_NEBIUS_INSECURE": "1",
            "NPA_NEBIUS_CA_FILE": "/ca.pem",
        },
    )
    assert (s.endpoint, s.insecure, str(s.ca_file), s.region) == ("127.0.0.1:1", True, "/ca.pem", "eu-north1")
    assert (
        NebiusSettings.from_options({"endpoint": "h:2"}, env={"NPA_NEBIUS_ENDPOINT": "h:1"}).endpoint == "h:2"
    )


def test_unknown_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="not_an_option"):
        NebiusSettings.from_options({"not_an_option": 1}, env={})
