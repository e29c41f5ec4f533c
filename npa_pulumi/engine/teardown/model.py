"""The teardown's vocabulary: what a destroy is asked to delete (`TeardownOptions`) and what a project
stack proves it owns (`ProjectEvidence`). Below the teardown, its guarded phases, resume and cleanup, which
all read them, so none of those imports another for a type."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

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
    def from_outputs(cls, stack: str, project_key: str, outputs: dict[str, Any]) -> ProjectEvidence:
        def text(name: str) -> str:
            value = outputs.get(name)
            return value if isinstance(value, str) else ""

        return cls(
            project_stack=stack,
            project_key=project_key,
            project_id=text("project_id"),
            project_created=outputs.get("project_created") is True,
            network_id=text("network_id"),
            subnet_id=text("subnet_id"),
            network_owned=outputs.get("network_owned") is True,
            bucket_id=text("bucket_id"),
            bucket_name=text("bucket_name"),
            bucket_created=outputs.get("bucket_created") is True,
            service_account_id=text("storage_service_account_id"),
            service_account_created=outputs.get("storage_service_account_created") is True,
            key_id=text("storage_key_id"),
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
