"""`ProjectNetwork`: the one subnet every cluster of a project uses — an existing subnet reused read-only,
or a network + subnet created and owned by the fleet when the project has none. It lives in the project
stack, so it is resolved once per project even when many cluster stacks deploy in parallel; an owned pair
is reclaimed when the project stack is destroyed, after its last cluster."""

from __future__ import annotations

import pulumi
from npa_pulumi.components.cloud_resources import Network


class ProjectNetwork(pulumi.ComponentResource):
    network_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]
    owned: pulumi.Output[bool]

    def __init__(
        self,
        name: str,
        *,
        cloud: str,
        profile: str,
        fleet: str,
        project_key: str,
        project_id: pulumi.Input[str],
        region: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("npa:fleet:ProjectNetwork", name, {"fleet": fleet, "project_key": project_key}, opts)
        binding = Network(
            f"{name}-binding",
            {
                "cloud": cloud,
                "profile": profile,
                "fleet": fleet,
                "project_key": project_key,
                "project_id": project_id,
                "region": region,
            },
            pulumi.ResourceOptions(parent=self),
        )
        self.network_id = binding.network_id
        self.subnet_id = binding.subnet_id
        self.owned = binding.owned
        self.register_outputs(
            {"network_id": self.network_id, "subnet_id": self.subnet_id, "owned": self.owned}
        )
