"""`FleetProject`: the project a fleet deploys into — an existing one verified by id, or one found by
name (`prefix + name`) and created on demand. A project is never deleted by the fleet."""

from __future__ import annotations

from typing import Any

import pulumi
from npa_pulumi.components.cloud_resources import Project


class FleetProject(pulumi.ComponentResource):
    project_id: pulumi.Output[str]
    created: pulumi.Output[bool]

    def __init__(
        self,
        name: str,
        *,
        cloud: str,
        profile: str,
        fleet: str,
        project_key: str,
        tenant_id: str,
        region: str,
        display_name: str,
        project_id: str | None,
        create_missing: bool = True,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props: dict[str, Any] = {
            "fleet": fleet,
            "project_key": project_key,
            "display_name": display_name,
            "project_id": project_id or "",
            "region": region,
        }
        super().__init__("npa:fleet:FleetProject", name, props, opts)
        project = Project(
            f"{name}-project",
            {
                "cloud": cloud,
                "profile": profile,
                "fleet": fleet,
                "project_key": project_key,
                "tenant_id": tenant_id,
                "region": region,
                "display_name": display_name,
                "project_id": project_id or "",
                "create_missing": create_missing,
            },
            pulumi.ResourceOptions(parent=self),
        )
        self.project_id = project.resolved_id
        self.created = project.created
        self.register_outputs({"project_id": self.project_id, "created": self.created})
