"""What a policy knows about the resource it is looking at, and about its K8sTrainingCluster parent.

CrossGuard resource policies see one resource at a time, but some guardrails join two: the
`npa:fleet:K8sTrainingCluster` component carries the spec's intent (capacity block, driver mode, the
NVSwitch acknowledgement, MIG) while its child `npa:TerraformModule` carries what is rendered. The engine
analyzes a parent before its children (a child's registration needs the parent's URN, which the engine
returns only after analyzing the parent), so the pack remembers each cluster component's facts by URN and
checks the child against them. Block ids are remembered only as SHA-256 fingerprints.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy.proxy import UnknownValueError

from .values import as_bool, as_str, fingerprint, reveal


@dataclass(frozen=True)
class Subject:
    """The resource under validation, independent of the SDK's args classes."""

    resource_type: str
    props: Mapping[str, Any]
    urn: str = ""
    name: str = ""
    parent: str | None = None
    additional_secret_outputs: tuple[str, ...] = ()

    @classmethod
    def from_args(cls, args: Any) -> Subject:
        opts = getattr(args, "opts", None)
        return cls(
            resource_type=args.resource_type,
            props=args.props,
            urn=args.urn,
            name=args.name,
            parent=getattr(opts, "parent", None) or None,
            additional_secret_outputs=tuple(getattr(opts, "additional_secret_outputs", None) or ()),
        )


@dataclass(frozen=True)
class ClusterFacts:
    urn: str
    # None where the value was unknown (preview) or absent.
    bound: bool | None = None
    block_fingerprint: str | None = None
    block_is_secret: bool | None = None
    gpu_driver_mode: str | None = None
    allow_unsafe_nvswitch_operator: bool | None = None
    nvswitch_topology: bool | None = None
    mig_enabled: bool | None = None


def _safe(read: Any) -> Any:
    try:
        return read()
    except (UnknownValueError, KeyError, TypeError):
        return None


def cluster_facts(urn: str, props: Mapping[str, Any]) -> ClusterFacts:
    def block() -> tuple[str | None, bool]:
        if "capacity_block_group" not in props:
            return None, False
        value, secret = reveal(props["capacity_block_group"], "capacity_block_group")
        return (value.strip() if isinstance(value, str) else None), secret

    block_value, block_secret = _safe(block) or (None, None)
    return ClusterFacts(
        urn=urn,
        bound=None if block_value is None else bool(block_value),
        block_fingerprint=fingerprint(block_value) if block_value else None,
        block_is_secret=block_secret if block_value else None,
        gpu_driver_mode=_safe(lambda: as_str(props.get("gpu_driver_mode"))),
        allow_unsafe_nvswitch_operator=_safe(lambda: as_bool(props.get("allow_unsafe_nvswitch_operator"))),
        nvswitch_topology=_safe(lambda: as_bool(props.get("nvswitch_topology"))),
        mig_enabled=_safe(lambda: as_bool(props.get("mig_enabled"))),
    )


@dataclass
class ClusterRegistry:
    """Facts of the cluster components seen so far in this deployment (one pack process per operation)."""

    _facts: dict[str, ClusterFacts] = field(default_factory=dict)
    # The SDK serves Analyze calls from a thread pool.
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, facts: ClusterFacts) -> None:
        with self._lock:
            self._facts[facts.urn] = facts

    def get(self, urn: str | None) -> ClusterFacts | None:
        if not urn:
            return None
        with self._lock:
            return self._facts.get(urn)
