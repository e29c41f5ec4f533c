"""Which share of a fleet's selection a run covers — its stage and its shard — and the walks of the fleet
graph (engine/graph.py) that decide which nodes each walk visits. Its own module, below the requests and
the graph that both read it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from npa_pulumi.errors import UserInputError


class Stage(StrEnum):
    """`--stage`: only the project stacks, or only the cluster stacks, of the selection."""

    PROJECTS = "projects"
    CLUSTERS = "clusters"


class WalkKind(StrEnum):
    UP = "up"
    PREVIEW = "preview"
    ADOPT = "adopt"
    REFRESH = "refresh"
    STATUS = "status"
    DESTROY = "destroy"


def parse_stage(stage: str | None, shard: str | None) -> Stage | None:
    """A stage is one of Stage's; the projects stage runs once, so it is never sharded (a shard owns
    clusters; every shard would run the same project stacks)."""
    if stage is None:
        return None
    try:
        parsed = Stage(stage)
    except ValueError:
        raise UserInputError(
            f"--stage {stage!r}: expected one of {', '.join(s.value for s in Stage)}"
        ) from None
    if parsed is Stage.PROJECTS and shard:
        raise UserInputError(
            "--stage projects cannot be combined with --shard: the project stacks run once, unsharded; "
            "shard the clusters stage (--stage clusters --shard K/N)"
        )
    return parsed


@dataclass(frozen=True)
class Share:
    """Which share of the selection a run covers: its stage and its shard (`K/N`, or None)."""

    stage: Stage | None = None
    shard: str | None = None

    def visits_projects(self, walk: WalkKind) -> bool:
        if walk is WalkKind.STATUS or self.stage is Stage.CLUSTERS:
            return False
        # Shards share project stacks: refreshed once by an unsharded run, destroyed once every shard ran.
        return not (self.shard and walk in (WalkKind.REFRESH, WalkKind.DESTROY))

    def visits_clusters(self, walk: WalkKind) -> bool:
        return self.stage is not Stage.PROJECTS

    @property
    def keeps_project_stacks(self) -> bool:
        """Whether a destroy of this share leaves the project stacks to a later run."""
        return bool(self.shard) or self.stage is Stage.CLUSTERS
