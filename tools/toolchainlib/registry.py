"""The components `toolchain.py ensure` provides: one entry each, naming its `ensure(pins)`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import (
    chromium,
    kuberay,
    kubernetes,
    kubernetes_provider,
    kwok,
    localcloud_providers,
    pulumi,
    seaweedfs,
    tofu,
    venv,
)
from .pins import Pins


@dataclass(frozen=True)
class Component:
    name: str  # what `ensure NAME` asks for
    ensure: Callable[[Pins], None]
    # A build from the Go module proxy: its cold build time on 2 cores, in minutes (2026-12-02, empty Go
    # caches, module downloads included). The Go builds run in lanes (lanes.py), longest first, after the
    # other components, which run first in the order listed.
    go_build_minutes: float | None = None
    in_all: bool = True  # part of `ensure all` (the default)


COMPONENTS: tuple[Component, ...] = (
    Component("venv", venv.ensure),  # first: the KubeRay build converts its CRDs with the venv's PyYAML
    Component("pulumi", pulumi.ensure, go_build_minutes=7.2),
    Component("terraform", tofu.ensure),
    Component("kubernetes", kubernetes.ensure, go_build_minutes=9.3),
    Component("kwok", kwok.ensure, go_build_minutes=3.4),
    Component("kuberay", kuberay.ensure, go_build_minutes=3.0),
    Component("pulumi-kubernetes", kubernetes_provider.ensure, go_build_minutes=18.7),
    # The local cloud's Terraform providers (tools/localcloud-providers): terraform-plugin-framework and
    # gRPC from the module proxy, ~1 min cold on 2 cores (2026-12-07, empty build cache).
    Component("localcloud-providers", localcloud_providers.ensure, go_build_minutes=1.2),
    # SeaweedFS's `weed`, the local cloud's S3 server (tools/seaweedfs): 1.4 min of module downloads and a
    # 13.5 min build at nice 19 on 2 cores shared with a CI run (2026-12-07, empty caches for its modules).
    Component("seaweedfs", seaweedfs.ensure, go_build_minutes=15.0),
    # Not in `all`: `make test` asks for it (the report's browser test).
    Component("chromium", chromium.ensure, in_all=False),
)


def names() -> tuple[str, ...]:
    """Every component, those of `all` first."""
    return tuple(c.name for c in COMPONENTS if c.in_all) + tuple(c.name for c in COMPONENTS if not c.in_all)


def default() -> set[str]:
    return {c.name for c in COMPONENTS if c.in_all}


def first_steps(wanted: set[str]) -> list[Component]:
    """The wanted components that are not Go builds, in the order listed."""
    return [c for c in COMPONENTS if c.name in wanted and c.go_build_minutes is None]


def go_builds(wanted: set[str]) -> list[Component]:
    """The wanted Go builds, longest first."""
    builds = [c for c in COMPONENTS if c.name in wanted and c.go_build_minutes is not None]
    return sorted(builds, key=lambda c: -(c.go_build_minutes or 0))
