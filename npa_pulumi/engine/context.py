"""The fleet context every operation receives: spec, targets, the request, the cloud port, the plans and their
fingerprints, the stack-op builders, retries (engine/retries.py), the stack-output cache and the one
scheduler.

Operations (`engine/operations/`), teardown, status, verification and the preflight gate take a
`FleetContext` and use only its public interface; none of them reaches into another's state.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.cloud.factory import AUTH_ENV, TENANT_ENV
from npa_pulumi.cloud.project_reads import FleetReads, LiveReader
from npa_pulumi.cloud.user_defaults import user_defaults
from npa_pulumi.engine.automation import (
    EngineSettings,
    HostMode,
    SharedProviderHost,
    StackExecutor,
    StackOp,
    ensure_state_key,
    host_mode,
)
from npa_pulumi.engine.backends.base import PlanSettings
from npa_pulumi.engine.backends.registry import backend_for
from npa_pulumi.engine.graph import FleetGraph, Walk
from npa_pulumi.engine.outputs_cache import OutputsCache
from npa_pulumi.engine.plans import FleetPlans, build_plans
from npa_pulumi.engine.programs import ClusterPlan, ProjectPlan
from npa_pulumi.engine.requests import (
    FleetRequest,
    Where,
    breaks_locks,
    creates_projects,
    fails_fast,
    policies,
    refreshes,
    runs_health_gate,
)
from npa_pulumi.engine.retries import Operation, RenderRetry, Retry, attach, stack_retry, text_of
from npa_pulumi.engine.scheduler import Scheduler
from npa_pulumi.engine.stack_ops import StackOps
from npa_pulumi.engine.teardown.model import TeardownOptions
from npa_pulumi.errors import NpaError, UserInputError
from npa_pulumi.output.progress import Progress
from npa_pulumi.output.results import FleetResult, StackResult, TeardownPhase
from npa_pulumi.output.stack_outputs import ClusterOutputs, ProjectOutputs
from npa_pulumi.runtime import provider_env
from npa_pulumi.runtime.analyzer_relay import SOCKET_ENV
from npa_pulumi.runtime.home import logs_dir
from npa_pulumi.runtime.provider_host import ATTACH_ENV

if TYPE_CHECKING:
    from npa_pulumi.cloud.factory import CloudKind
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.plan import Target
    from npa_pulumi.spec import FleetSpec

log = logging.getLogger(__name__)


def builtin_policy_pack() -> Path:
    """Where the fleet-guardrails pack is. The engine runs it in a plugin host of its own: the orchestrator
    needs its location, never its code (the pack imports pulumi_policy), so it is found, not imported."""
    spec = importlib.util.find_spec("npa_pulumi.policies")
    if spec is None or not spec.submodule_search_locations:
        raise NpaError("the fleet-guardrails policy pack is not installed (npa_pulumi.policies)")
    return Path(next(iter(spec.submodule_search_locations))) / "fleet-guardrails"


class FleetContext:
    def __init__(
        self,
        spec: FleetSpec,
        targets: Sequence[Target],
        request: FleetRequest,
        spec_path: str | None = None,
        progress: Progress | None = None,
        render_retry: RenderRetry | None = None,
    ) -> None:
        self.spec = spec
        self.request = request
        self.spec_path = spec_path  # the spec file, for exact retries and receipts
        # How the caller spells a retry where text is shown or stored (engine/retries.py); None: neutrally.
        self.render_retry = render_retry
        # The targets are the selection, a shard's share already: the Selection checked the shard and the
        # stage and selected once (engine/requests.py); `share` says which share this run covers (run locks,
        # shared project stacks, costs, receipts).
        self.targets = list(targets)
        self.share = request.selection.share
        self.where: Where = request.where
        self.refreshing = refreshes(request)  # `--refresh`: every stack re-read first
        self.progress = progress or Progress(enabled=request.show_progress)
        self.settings = EngineSettings.resolve(
            self.where.backend, self.where.passphrase_file, secrets_provider=self.where.secrets_provider
        )
        if self.where.auth and self.where.cloud == "nebius":
            # The dynamic providers (the engine's provider process) make their own adapter: same auth.
            self.settings.extra_env[AUTH_ENV] = self.where.auth
        self._cloud: CloudPort | None = None
        self._mint_state_key()
        self._plans: FleetPlans | None = None
        self._graph: FleetGraph | None = None
        # Set by destroy, cleanup and the teardown plan before planning: they run no stack's program, so
        # their plans need no SSH key or compatible recipe (build_plans' for_destroy).
        self.deleting = False
        # Cluster stacks with nothing for `up` to do (engine/liveness.py computes it; None: not yet).
        self.unchanged_cluster_stacks: set[str] | None = None
        self._fleet_reads: FleetReads | None = None
        self._target_index: tuple[list[Target] | None, dict[str, Target]] = (None, {})
        chosen = policies(request)
        packs = [str(builtin_policy_pack()), *chosen.packs]
        # Pulumi pairs configs with packs by position; one file keyed by policy name serves every pack
        # (a pack ignores entries for policies it does not have).
        configs = [chosen.config] * len(packs) if chosen.config else []
        mode = host_mode()
        self.provider_host = (
            SharedProviderHost(
                self.settings.env,
                self.settings.work_dir,
                logs_dir(spec.name) / "provider-host.log",
                policy_packs=[str(builtin_policy_pack())],  # the product's own; others run as before
                mode=mode,
            )
            if mode is not HostMode.OFF
            else None
        )
        self.executor = StackExecutor(
            self.settings,
            self.progress,
            logs_dir(spec.name),
            packs,
            configs,
            break_lock=breaks_locks(request),
            provider_host=self.provider_host,
        )
        # The concerns an operation holds for its walk (it need not come back here for each read): the
        # outputs read so far, and the stack ops with their fingerprints.
        self.outputs = OutputsCache(self.executor.outputs, request.concurrency)
        self.stack_ops = StackOps(
            self.where.cloud,
            self.profile,
            self.executor.policy_packs,
            chosen.config,
            self.outputs.deployed_by_fleet,
        )

    def warm_provider_host(self) -> None:
        """The command will run the engine: start its shared provider host now, beside the work before the
        first engine run (stack creation, the other stacks' checks), instead of in that run's path."""
        if self.provider_host is not None:
            self.provider_host.warm()

    def close(self) -> None:
        """Stop the command's shared provider host, if one runs (a later command starts another)."""
        if self.provider_host is not None:
            self.provider_host.close()
        self.settings.extra_env.pop(ATTACH_ENV, None)
        self.settings.extra_env.pop(SOCKET_ENV, None)

    def _mint_state_key(self) -> None:
        """Federated auth against an s3:// backend with no AWS credentials given: the run's short-lived key
        to the state bucket, minted for its service account before the engine first reads the state, and
        deleted when the process ends (engine/automation/state_key.py)."""
        minted = ensure_state_key(
            self.settings.backend_url, self.where.cloud, self.where.auth, lambda: self.cloud
        )
        if minted is not None:
            self.progress.message(f"{self.spec.name}: {minted.describe()}; deleted when the run ends")

    # ----------------------------------------------------------------------------- the cloud

    @property
    def cloud(self) -> CloudPort:
        if self._cloud is None:
            from npa_pulumi.cloud.factory import make_cloud

            kind: CloudKind = "nebius" if self.where.cloud == "nebius" else "local"
            # The spec's tenant: a credentials file needs it, and a profile of another tenant is refused.
            pinned: dict[str, str] = {}
            if kind == "nebius":
                pinned = {"tenant_id": self.spec.tenant_id} if self.spec.tenant_id else {}
                if self.where.auth:
                    pinned["auth"] = self.where.auth
            self._cloud = make_cloud(
                kind, profile=self.profile or None, region=self.spec.region or None, **pinned
            )
        return self._cloud

    def provider_environment(self) -> AbstractContextManager[None]:
        """The environment the command's dynamic providers get (the tenant, `--auth`), for provider code the
        command runs in its own process: Terraform's plan in a preview or an adoption."""
        hosting = (ATTACH_ENV, SOCKET_ENV)  # how the engine reaches the shared host: not the providers' own
        return provider_env.overlay({k: v for k, v in self.settings.extra_env.items() if k not in hosting})

    @property
    def profile(self) -> str:
        return self.where.profile or self.spec.profile or ""

    def tenant_id(self) -> str:
        # spec, then the profile, then ~/.npa/config.yaml (cloud/user_defaults.py)
        return self.spec.tenant_id or self.cloud.principal().tenant_id or user_defaults().tenant_id

    def resolve_regions(self) -> None:
        """Give targets without a region (none in the spec or their project) the one the profile's
        configuration points at (`CloudPort.default_region`), as docs/spec.md promises."""
        missing = [t for t in self.targets if not t.region]
        if not missing:
            return
        region = self.cloud.default_region() or user_defaults().region
        if not region:
            raise UserInputError(
                f"no region for {', '.join(t.cluster_stack for t in missing)}: set `region` in the spec or "
                f"the project; the {self.where.cloud} profile's configuration names none (for Nebius, the "
                "region of the profile's parent-id project)"
            )
        self.progress.message(
            f"{self.spec.name}: region {region}, from the profile's configuration, for "
            f"{len(missing)} cluster(s) whose spec names none"
        )
        self.targets = [t if t.region else t.model_copy(update={"region": region}) for t in self.targets]

    # ----------------------------------------------------------------------------- the plans

    def plans(self) -> FleetPlans:
        if self._plans is None:
            self.resolve_regions()
            tenant = self.tenant_id()
            # Dynamic providers run in the engine's provider process; they learn the tenant from here.
            self.settings.extra_env[TENANT_ENV] = tenant
            in_cluster = self.cloud.kubernetes_api_available()
            self._plans = build_plans(
                self.spec,
                self.targets,
                PlanSettings(
                    cloud=self.where.cloud,
                    recipes=self.request.recipes,
                    health_gate=runs_health_gate(self.request),
                    create_projects=creates_projects(self.request),
                ),
                tenant,
                in_cluster,
                for_destroy=self.deleting,
                backend_for=backend_for,
            )
            for warning in self._plans.warnings:
                self.progress.message(warning)
        return self._plans

    def graph(self) -> FleetGraph:
        """The fleet graph of this run's plans and share: what every operation walks."""
        if self._graph is None:
            self._graph = FleetGraph(self.plans(), self.share)
        return self._graph

    def live_reads(self, project_id: str) -> LiveReader:
        """The live cloud's objects of a project, listed once for this command (cloud/project_reads.py):
        what fleet-wide reads (`status`, the no-op checks at a command's start) ask of each cluster, without
        a call per cluster. Checks after this command changed something ask the cloud itself."""
        if self._fleet_reads is None:
            self._fleet_reads = FleetReads(self.cloud)
        return self._fleet_reads.project(project_id)

    def project_plan(self, stack: str) -> ProjectPlan:
        return next(p for p in self.plans().projects if p.stack == stack)

    def target_of(self, cluster_stack: str) -> Target | None:
        """The selected target of a cluster stack (None when none is selected): an index, as every
        deployed cluster of a 10,000-cluster `up` asks."""
        if self._target_index[0] is not self.targets:  # `resolve_regions` replaces the list
            self._target_index = (self.targets, {t.cluster_stack: t for t in self.targets})
        return self._target_index[1].get(cluster_stack)

    def fingerprint(self, plan: ProjectPlan | ClusterPlan) -> str:
        """What the stack of `plan` records as deployed from (StackOps.fingerprint)."""
        return self.stack_ops.fingerprint(plan)

    @property
    def replacement_policy_enabled(self) -> bool:
        return self.stack_ops.replacement_policy_enabled

    # ---------------------------------------------------------------------------- stack ops

    def result(self, command: str) -> FleetResult:
        return FleetResult(
            command=command,
            fleet=self.spec.name,
            cloud=self.where.cloud,
            backend=self.settings.backend_url,
            shard=self.share.shard,
        )

    def project_op(self, plan: ProjectPlan) -> StackOp:
        return self.stack_ops.project_op(plan)

    def cluster_op(self, plan: ClusterPlan, project_ready: bool = True) -> StackOp:
        return self.stack_ops.cluster_op(plan, project_ready)

    def reading_op(self, plan: ClusterPlan) -> StackOp:
        return self.stack_ops.reading_op(plan)

    def target_ops(self, targets: Sequence[Target] | None = None) -> list[StackOp]:
        """Program-less ops of every selected target's cluster stack (or of `targets`)."""
        return self.stack_ops.target_ops(self.targets if targets is None else targets)

    def retry(
        self,
        operation: Operation,
        project_key: str,
        cluster: str | None = None,
        teardown: TeardownOptions | None = None,
    ) -> Retry:
        """`operation` again for one project (and cluster) of this run: the same spec, cloud, profile,
        backend and passphrase (engine/retries.py); a destroy's with the deletions it was asked for."""
        return stack_retry(operation, self.where, self.spec_path, project_key, cluster, teardown)

    def retry_text(self, retry: Retry) -> str:
        """The retry as this run's caller spells it (the CLI: the command line), else its neutral text."""
        return text_of(retry, self.render_retry)

    def mark_retry(self, target: StackResult | TeardownPhase, retry: Retry) -> str:
        """Put `retry` on a stack's or a phase's result, structured and as text; the text."""
        return attach(target, retry, self.render_retry)

    # ------------------------------------------------------------------------ stack outputs

    def stack_outputs(
        self, ops: Sequence[StackOp], refresh: bool = False
    ) -> dict[str, dict[str, Any] | None]:
        """Outputs of each stack (None when it does not exist), read in parallel and cached."""
        return self.outputs.read_all(ops, refresh)

    def outputs_of(self, op: StackOp) -> dict[str, Any] | None:
        return self.outputs.read_one(op)

    def cached_outputs(self, stack: str) -> dict[str, Any] | None:
        return self.outputs.cached(stack)

    # ---------------------------------------------------------------------------- scheduling

    def scheduler(
        self, ops: Sequence[StackOp], limits: dict[Any, int] | None = None
    ) -> Scheduler[StackResult]:
        """The one scheduler over `ops` (each job keyed by its op's stack), configured by --concurrency and
        --fail-fast (engine/scheduler.py)."""
        by_stack = {op.stack: op for op in ops}

        def skipped(stack: str) -> StackResult:
            self.progress.phase(stack, "skipped")
            return by_stack[stack].result(
                "skipped", error="not started: an earlier target failed (--fail-fast)"
            )

        return Scheduler(
            concurrency=self.request.concurrency,
            is_failure=lambda result: result.failed,
            failed=lambda stack, error: by_stack[stack].result("failed", error=error),
            skipped=skipped,
            fail_fast=fails_fast(self.request),
            limits=limits or {},
        )

    def run_walk(self, ops: Sequence[StackOp], walk: Walk[StackResult]) -> list[StackResult]:
        """Run `walk` over the stacks of `ops` on the one scheduler (each node's progress line added
        first); its results, settled ones first, then the scheduled ones in graph order."""
        for op in ops:
            self.progress.add(op.stack)
        return walk.run(self.scheduler(ops))

    # ------------------------------------------------------------------------------ results

    def unchanged_result(self, op: StackOp) -> StackResult:
        outputs = ClusterOutputs.read(self.outputs.cached(op.stack))
        self.progress.add(op.stack)
        self.progress.phase(op.stack, "unchanged", "inputs and live state match; skipped")
        return op.result("unchanged", **outputs.identity())

    def remember_policy(self, plan: ProjectPlan | ClusterPlan, result: StackResult) -> None:
        """After an engine run that left the stack as its plan says: its policy results, for previews."""
        from npa_pulumi.engine import policy_results
        from npa_pulumi.policies.catalog import NODE_GROUP_REPLACEMENT_POLICY

        # The replacement policy judges a Terraform plan, not the stack's plan: never replayed on a skip.
        kept = [v for v in result.policy if v.policy != NODE_GROUP_REPLACEMENT_POLICY]
        policy_results.store(self.settings.backend_url, plan.stack, self.fingerprint(plan), kept)

    def fill_identity(self, result: FleetResult) -> None:
        """Give every cluster entry its project id when the stacks know it."""
        # The clusters stage runs no project stack: their outputs, read before, name the project.
        project_ids = {
            p.project_key: ProjectOutputs.read(self.outputs.cached(p.stack)).project_id or None
            for p in self.plans().projects
        }
        project_ids.update(
            {s.project_key: s.project_id for s in result.stacks if s.kind == "project" and s.project_id}
        )
        for stack in result.stacks:
            if stack.kind == "cluster":
                stack.project_id = stack.project_id or project_ids.get(stack.project_key)
