"""`make_cloud`, lazy imports, and the `nebius` adapter's conformance to the port."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.cloud.factory import make_cloud
from npa_pulumi.cloud.nebius import NebiusCloud, ProfileError
from npa_pulumi.cloud.port import CloudPort


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("NEBIUS_IAM_TOKEN", "NEBIUS_PROFILE", "NPA_NEBIUS_ENDPOINT", "NPA_REUSE_IAM_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".nebius").mkdir()
    profiles = {"a": {"tenant-id": "tenant-a", "token-file": str(tmp_path / "t")}}
    (tmp_path / ".nebius" / "config.yaml").write_text(yaml.safe_dump({"profiles": profiles, "default": "a"}))
    return tmp_path


def test_make_cloud_nebius(home: Path) -> None:
    cloud = make_cloud("nebius", profile="a", region="eu-north1", call_timeout_s=5.0)
    assert isinstance(cloud, NebiusCloud) and cloud.name == "nebius"
    assert cloud.identity.tenant_id == "tenant-a"
    assert cloud.route.domain == "api.eu.nebius.cloud:443"
    assert cloud.settings.call_timeout_s == 5.0
    assert "tenant-a" in repr(cloud) and "token" not in repr(cloud).lower()


def test_make_cloud_rejects_unknown_kinds_and_options(home: Path) -> None:
    with pytest.raises(ValueError, match="unknown cloud kind"):
        make_cloud("aws")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        make_cloud("nebius", bogus=1)
    with pytest.raises(ProfileError):
        make_cloud("nebius", profile="nope")


def test_importing_the_cloud_layer_does_not_load_the_sdk() -> None:
    code = (
        "import sys, npa_pulumi.cloud, npa_pulumi.cloud.factory, npa_pulumi.cloud.nebius;"
        "heavy = ('nebius.', 'grpc', 'pulumi');"
        "print(sorted(m for m in sys.modules if m == 'nebius' or m.startswith(heavy)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_adapter_matches_the_port_signatures() -> None:
    for name, proto in vars(CloudPort).items():
        if name.startswith("_") or not inspect.isfunction(proto):
            continue
        impl = getattr(NebiusCloud, name)
        expected = [(p.name, p.default) for p in inspect.signature(proto).parameters.values()]
        actual = [(p.name, p.default) for p in inspect.signature(impl).parameters.values()]
        assert actual == expected, name


class _Page:
    def __init__(self, items: list[int], token: str) -> None:
        self.items, self.next_page_token = items, token


def test_a_repeated_page_token_is_an_error_not_a_loop(home: Path) -> None:
    cloud = NebiusCloud()
    pages = {"": _Page([1], "t1"), "t1": _Page([2], "t1")}

    def send(token: str, kwargs: dict[str, Any]) -> Any:
        return SimpleNamespace(wait=lambda: pages[token])

    with pytest.raises(CloudError, match="twice"):
        cloud._list("x.List", {"parent_id": "p"}, send)
    good = {"": _Page([1], "t1"), "t1": _Page([2, 3], "")}
    assert cloud._list("x.List", {}, lambda token, kw: SimpleNamespace(wait=lambda: good[token])) == [1, 2, 3]
