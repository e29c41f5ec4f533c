"""What a command runs the engine on: the stack op of a project or cluster plan (its program, tags and
gate), and what its stack records as deployed from (the fingerprint: the plan, the toolchain and the
policies, engine/fingerprint.py), computed once per stack of the run."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from npa_pulumi.engine.automation import StackOp, stack_tags
from npa_pulumi.engine.backends.registry import backend_for
from npa_pulumi.engine.fingerprint import ToolchainVersions, fingerprint, policy_identity, toolchain_versions
from npa_pulumi.engine.programs import ClusterPlan, ProjectPlan, project_program

if TYPE_CHECKING:
    from npa_pulumi.plan import Target


class StackOps:
    """The stack ops of one run: its cloud and profile, its policy packs and config; `tagged` says whether
    a stack is known to carry npa-pulumi's tags already (then they are not set again)."""

    def __init__(
        self,
        cloud: str,
        profile: str,
        policy_packs: Sequence[str],
        policy_config: str | None,
        tagged: Callable[[str], bool],
    ) -> None:
        self.cloud = cloud
        self.profile = profile
        self._policy_packs = list(policy_packs)
        self._policy_config = policy_config
        self._tagged = tagged
        self._toolchain: ToolchainVersions | None = None
        self._fingerprints: dict[str, str] = {}
        self._policy_identity: str | None = None

    # ------------------------------------------------------------------------- fingerprints

    def toolchain(self) -> ToolchainVersions:
        if self._toolchain is None:
            self._toolchain = toolchain_versions()
        return self._toolchain

    def policy_identity(self) -> str:
        if self._policy_identity is None:
            self._policy_identity = policy_identity(self._policy_packs, self._policy_config)
        return self._policy_identity

    def fingerprint(self, plan: ProjectPlan | ClusterPlan) -> str:
        """What the stack of `plan` records as deployed from (engine/fingerprint.py)."""
        if plan.stack not in self._fingerprints:
            versions = self.toolchain().covering(terraform=isinstance(plan, ClusterPlan))
            versions["policies"] = self.policy_identity()
            self._fingerprints[plan.stack] = fingerprint(plan, self.cloud, self.profile, versions)
        return self._fingerprints[plan.stack]

    @functools.cached_property
    def replacement_policy_enabled(self) -> bool:
        """Whether the user's --policy-config leaves the gpu-node-group-replacement policy on."""
        from npa_pulumi.policies.catalog import NODE_GROUP_REPLACEMENT_POLICY

        if not self._policy_config:
            return True
        try:
            config = json.loads(Path(self._policy_config).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return True  # the engine reports an unreadable config itself
        if not isinstance(config, dict):
            return True
        entry = config.get(NODE_GROUP_REPLACEMENT_POLICY, config.get("all"))
        level = entry.get("enforcementLevel") if isinstance(entry, dict) else entry
        return level != "disabled"

    # ------------------------------------------------------------------------------ the ops

    def project_op(self, plan: ProjectPlan) -> StackOp:
        return StackOp(
            plan.stack,
            "project",
            plan.project_key,
            None,
            project_program(plan, self.cloud, self.profile, self.fingerprint(plan)),
            stack_tags(plan.fleet, plan.project_key, None),
            tags_needed=not self._tagged(plan.stack),
        )

    def cluster_op(self, plan: ClusterPlan, project_ready: bool = True) -> StackOp:
        backend = backend_for(plan.backend)
        assert backend is not None, f"{plan.stack}: planned without a backend"  # build_plans planned it
        program = backend.program(plan, self.cloud, self.profile, project_ready, self.fingerprint(plan))
        return StackOp(
            plan.stack,
            "cluster",
            plan.project_key,
            plan.cluster_name,
            program,
            stack_tags(plan.fleet, plan.project_key, plan.cluster_name),
            tags_needed=not self._tagged(plan.stack),
            gate_state=backend.gate_state(plan),
            gate_type=backend.gate_type,
            backend=plan.backend,
            key_shared_with=plan.project_stack,
        )

    @staticmethod
    def reading_op(plan: ClusterPlan) -> StackOp:
        """A program-less op of a cluster stack: for reading what it recorded (`status`), without building
        its program and fingerprint."""
        return StackOp(
            plan.stack,
            "cluster",
            plan.project_key,
            plan.cluster_name,
            None,
            stack_tags(plan.fleet, plan.project_key, plan.cluster_name),
            backend=plan.backend,
        )

    @staticmethod
    def target_ops(targets: Sequence[Target]) -> list[StackOp]:
        """Program-less ops of the targets' cluster stacks: for reading outputs only (they need no plan, so
        no recipe, SSH key or region)."""
        return [
            StackOp(t.cluster_stack, "cluster", t.project_key, t.cluster_name, None, {}, backend=t.backend)
            for t in targets
        ]
