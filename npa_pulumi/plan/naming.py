"""Names the fleet derives at deploy time (shared by the components and the read-only preflight)."""

from __future__ import annotations

import hashlib


def derived_bucket_name(tenant_id: str, project_id: str, fleet: str) -> str:
    """A stable, private bucket name for a project whose spec leaves `bucket_name` empty: nothing
    guessable about the tenant or project appears in it."""
    digest = hashlib.sha256(f"{tenant_id}\0{project_id}\0{fleet}".encode()).hexdigest()
    return f"npa-fleet-{digest[:32]}"


def kube_context_name(fleet: str, project_key: str, cluster: str) -> str:
    """The kube context (and kubeconfig file name) of a fleet's cluster, as the original tool names it."""
    return f"fleet-{fleet}-{project_key}-{cluster}"
