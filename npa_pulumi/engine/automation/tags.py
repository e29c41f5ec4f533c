"""The tags beside each stack: the npa tags that say whose it is (`npa:fleet`, `npa:project`,
`npa:cluster`, `npa:kind`) and the lifecycle records of engine/lifecycle.py.

On a DIY (file://) backend they are written to the stack's tags file directly (diy_backend.write_tags:
`pulumi stack tag set` is one engine start per tag); elsewhere through the engine, listing a stack's tags
once per command and then changing only what differs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from npa_pulumi.engine.automation import diy_backend
from npa_pulumi.engine.automation.diy_backend import NO_FAST_PATH
from npa_pulumi.engine.automation.stack_op import StackOp

if TYPE_CHECKING:
    from pulumi import automation as auto

log = logging.getLogger(__name__)

TAG_FLEET = "npa:fleet"
TAG_PROJECT = "npa:project"
TAG_CLUSTER = "npa:cluster"
TAG_KIND = "npa:kind"


def stack_tags(fleet: str, project_key: str, cluster: str | None) -> dict[str, str]:
    tags = {TAG_FLEET: fleet, TAG_PROJECT: project_key, TAG_KIND: "cluster" if cluster else "project"}
    if cluster:
        tags[TAG_CLUSTER] = cluster
    return tags


def ensure_tags(stack: auto.Stack, tags: dict[str, str], current: dict[str, str] | None = None) -> None:
    """Set only the tags that differ (each tag call is a CLI round trip); `current` spares listing them
    when the caller knows them (a stack it has just created has none)."""
    if current is None:
        try:
            current = dict(stack.list_tags())
        except Exception:
            current = {}
    for name, value in tags.items():
        if current.get(name) != value:
            stack.set_tag(name, value)


# Selects an existing stack for the engine's tag calls (None: no such stack).
SelectExisting = Callable[[StackOp], "auto.Stack | None"]


class StackTags:
    """Reading and writing the tags of one backend's stacks."""

    def __init__(self, backend_url: str, project_name: str, select: SelectExisting) -> None:
        self.backend_url = backend_url
        self.project_name = project_name
        self._select = select
        self._known: dict[str, dict[str, str]] = {}  # lifecycle writes on non-DIY backends

    def label(self, op: StackOp, stack: auto.Stack, created: bool) -> None:
        """Set the op's npa tags before its up or preview (`created`: a stack made just now has no tags,
        so they are set without listing them first)."""
        if not op.tags_needed or diy_backend.write_tags(
            self.backend_url, self.project_name, op.stack, op.tags
        ):
            return
        ensure_tags(stack, op.tags, current={} if created else None)

    def write_lifecycle(
        self,
        op: StackOp,
        tags: dict[str, str],
        remove: tuple[str, ...] = (),
        stack: auto.Stack | None = None,
    ) -> None:
        """Record lifecycle tags beside the stack (engine/lifecycle.py). Best effort: a record that cannot
        be written leaves `status` with the outputs, it never fails the run."""
        if diy_backend.write_tags(self.backend_url, self.project_name, op.stack, tags, remove):
            return
        # Elsewhere every tag call is an engine start: list once per stack, then change only what differs.
        try:
            stack = stack or self._select(op)
            if stack is None:
                return
            current = self._known.get(op.stack)
            if current is None:
                current = self._known[op.stack] = dict(stack.list_tags())
            for name, value in tags.items():
                if current.get(name) != value:
                    stack.set_tag(name, value)
                    current[name] = value
            for name in remove:
                if name in current:
                    stack.remove_tag(name)
                    del current[name]
        except Exception as err:  # the engine refused (a backend without tags): status falls back
            self._known.pop(op.stack, None)
            log.warning("could not record the lifecycle of %s: %s", op.stack, err)

    def read(self, op: StackOp) -> dict[str, str] | None:
        """The tags recorded beside the stack (None: no stack, or none could be read)."""
        tags = diy_backend.read_tags(self.backend_url, self.project_name, op.stack)
        if tags is NO_FAST_PATH:
            try:
                stack = self._select(op)
                tags = dict(stack.list_tags()) if stack is not None else None
            except Exception as err:
                log.warning("could not read the tags of %s: %s", op.stack, err)
                tags = None
        return {str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else None
