"""The teardown's vocabulary: what a destroy is asked to delete (`TeardownOptions`) and what a project
stack proves it owns (`ProjectEvidence`). Below the teardown, its guarded phases, resume and cleanup, which
all read them, so none of those imports another for a type."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from npa_pulumi.output.stack_outputs import ProjectOutputs

RECEIPT_VERSION = 1
STACK_PHASES = ("cluster", "network")  # phases that destroy a Pulumi stack (and so need the spec)
UNFINISHED = ("planned", "refused", "failed", "blocked")  # what a resume plans again


@dataclass(frozen=True)
class TeardownOptions:
    delete_buckets: bool = False
    delete_nonempty_buckets: bool = False
    delete_storage_identity: bool = False
    delete_projects: bool = False


@dataclass
class ProjectEvidence:
    """What a project stack recorded about what it owns: ids and creation flags, nothing secret. Kept as the
    project's teardown record (`<npa home>/teardown/<fleet>/<project stack>.json`) before the stack is
    destroyed, so a later, narrower teardown (`--delete-buckets` after the stack is gone) still has proof."""

    project_stack: str
    project_key: str
    project_id: str = ""
    project_created: bool = False
    # The spec names the project by id (`project_id:`): the fleet uses it and never deletes it, so
    # `--delete-projects` does not ask for its deletion (a retention, not a refusal).
    project_declared: bool = False
    network_id: str = ""
    subnet_id: str = ""
    network_owned: bool = False
    bucket_id: str = ""
    bucket_name: str = ""
    bucket_created: bool = False
    service_account_id: str = ""
    service_account_created: bool = False
    key_id: str = ""

    @classmethod
    def from_outputs(cls, stack: str, project_key: str, outputs: Mapping[str, Any]) -> ProjectEvidence:
        recorded = ProjectOutputs.read(outputs)
        return cls(
            project_stack=stack,
            project_key=project_key,
            project_id=recorded.project_id or "",
            project_created=recorded.project_created,
            network_id=recorded.network_id or "",
            subnet_id=recorded.subnet_id or "",
            network_owned=recorded.network_owned,
            bucket_id=recorded.bucket_id or "",
            bucket_name=recorded.bucket_name or "",
            bucket_created=recorded.bucket_created,
            service_account_id=recorded.storage_service_account_id or "",
            service_account_created=recorded.storage_service_account_created,
            key_id=recorded.storage_key_id or "",
        )

    def merged_with(self, record: ProjectEvidence | None) -> ProjectEvidence:
        """A re-deployed stack finds what an earlier one created (and records `created: false`); the
        earlier record of the same ids still proves it."""
        if record is None:
            return self
        same = record.project_id == self.project_id
        return ProjectEvidence(
            **{
                **asdict(self),
                "project_created": self.project_created or (same and record.project_created),
                "bucket_created": self.bucket_created
                or (bool(self.bucket_id) and record.bucket_id == self.bucket_id and record.bucket_created),
                "service_account_created": self.service_account_created
                or (
                    bool(self.service_account_id)
                    and record.service_account_id == self.service_account_id
                    and record.service_account_created
                ),
            }
        )
