"""Fleet operations: project stacks first, then cluster stacks on a bounded worker pool.

    fleet = Fleet(spec, targets, FleetOptions(cloud="local", concurrency=4))
    result = fleet.up()        # or preview / destroy / status / refresh

Ordering and safety:
* everything that can be checked offline or read-only (recipe materialization and compatibility, tfvars,
  preflight) happens before the first mutation; a failure there touches nothing;
* a project stack (project, network, storage) is updated once, before any of its cluster stacks, so many
  clusters deploying in parallel never race to create the same network;
* `continue-on-error` (default) keeps going past a failing target; `fail-fast` stops scheduling new work;
* destroy runs cluster stacks first, and a project stack only when none of its cluster stacks remain;
  projects and buckets are retained, an owned network is reclaimed;
* `--stage projects|clusters` splits those two phases across runs (CI: the projects stage once, the
  clusters stage sharded over a matrix); the clusters stage of `up` refuses to start while a project
  stack it needs is not deployed, and destroy's projects stage keeps a project whose clusters remain.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import json
import logging
import shlex
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.bridge.drift import LIVE_OBJECTS_OUTPUT, Drift
from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.cloud.factory import TENANT_ENV
from npa_pulumi.engine.diy_backend import checkpoint_outputs, interrupted
from npa_pulumi.engine.fingerprint import (
    FINGERPRINT_OUTPUT,
    ToolchainVersions,
    fingerprint,
    policy_identity,
    toolchain_versions,
)
from npa_pulumi.engine.lifecycle import validating_state
from npa_pulumi.engine.plans import FleetPlans, build_plans
from npa_pulumi.engine.programs import ClusterPlan, ProjectPlan, cluster_program, project_program
from npa_pulumi.engine.progress import Progress
from npa_pulumi.engine.provider_host import SharedProviderHost, enabled
from npa_pulumi.engine.stack_operations import StackExecutor, StackOp, change_counts
from npa_pulumi.engine.stacks import stack_tags
from npa_pulumi.engine.workspace import PROJECT_NAME, EngineSettings
from npa_pulumi.errors import NpaError, UserInputError
from npa_pulumi.output.results import FAILED_LIFECYCLES, FleetResult, StackResult
from npa_pulumi.plan.naming import kube_context_name
from npa_pulumi.runtime.analyzer_service import SOCKET_ENV
from npa_pulumi.runtime.home import logs_dir
from npa_pulumi.runtime.provider_host import ATTACH_ENV

if TYPE_CHECKING:
    from npa_pulumi.cloud.factory import CloudKind
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.engine.resume import Receipt
    from npa_pulumi.engine.teardown import TeardownOptions
    from npa_pulumi.plan import Target
    from npa_pulumi.spec import FleetSpec

log = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 4


def builtin_policy_pack() -> Path:
    """Where the fleet-guardrails pack is. The engine runs it in a plugin host of its own: the orchestrator
    needs its location, never its code (the pack imports pulumi_policy), so it is found, not imported."""
    spec = importlib.util.find_spec("npa_pulumi.policies")
    if spec is None or not spec.submodule_search_locations:
        raise NpaError("the fleet-guardrails policy pack is not installed (npa_pulumi.policies)")
    return Path(next(iter(spec.submodule_search_locations))) / "fleet-guardrails"


@dataclass
class FleetOptions:
    cloud: str = "local"
    profile: str | None = None
    backend: str | None = None
    passphrase_file: str | None = None
    recipe_dir: str | None = None
    recipe_ref: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    fail_fast: bool = False
    policy_packs: list[str] = field(default_factory=list)
    policy_config: str | None = None
    create_projects: bool = True
    preflight: bool = True
    refresh: bool = False
    health_gate: bool = True  # False: `up --no-health-gate`, clusters deployed with validation "skipped"
    spec_path: str | None = None  # for exact retry commands
    show_progress: bool = True
    # `--break-lock`: take over stack locks (and run records) that another machine holds; never those of a
    # live process on this machine. Without it only a lock whose owner is provably gone is recovered.
    break_lock: bool = False
    # `--shard K/N`: only the clusters this shard owns (plan/shards.py); project stacks are shared.
    shard: str | None = None
    shard_wait_s: float = 1800.0  # how long a shard waits for another to finish a shared project stack
    # `--stage projects|clusters`: only the project stacks, or only the cluster stacks, of the selection, so
    # CI runs the project phase once and the cluster phase across a matrix (None: both, in order).
    stage: str | None = None


STAGES = ("projects", "clusters")


def check_stage(stage: str | None, shard: str | None) -> None:
    """A stage is one of STAGES; the projects stage runs once, so it is never sharded (a shard owns
    clusters; every shard would run the same project stacks)."""
    if stage is not None and stage not in STAGES:
        raise UserInputError(f"--stage {stage!r}: expected one of {', '.join(STAGES)}")
    if stage == "projects" and shard:
        raise UserInputError(
            "--stage projects cannot be combined with --shard: the project stacks run once, unsharded; "
            "shard the clusters stage (--stage clusters --shard K/N)"
        )


def _hosted(method: Callable[..., FleetResult]) -> Callable[..., FleetResult]:
    """A command whose engine runs share one dynamic-provider host (engine/provider_host.py): the host
    is stopped when the command ends, however it ends."""

    @functools.wraps(method)
    def run(self: Fleet, *args: Any, **kwargs: Any) -> FleetResult:
        try:
            return method(self, *args, **kwargs)
        finally:
            self.close()

    return run


def _exclusive(command: str) -> Callable[[Callable[..., FleetResult]], Callable[..., FleetResult]]:
    """Run a mutating command holding its selected stacks against other runs (engine/runlock.py): a run
    whose selection overlaps a live one fails before it starts, instead of racing it stack by stack."""

    def wrap(method: Callable[..., FleetResult]) -> Callable[..., FleetResult]:
        @functools.wraps(method)
        def run(self: Fleet, *args: Any, **kwargs: Any) -> FleetResult:
            from npa_pulumi.engine.runlock import exclusive_run

            stage = self.options.stage
            stacks = {t.cluster_stack for t in self.targets} if stage != "projects" else set()
            if not self.options.shard and stage != "clusters":
                # Shards of one fleet share project stacks: those are single-flight through the engine's
                # stack lock instead (Fleet._up_project), so shards on one machine can run side by side.
                # The clusters stage only reads them.
                stacks |= {t.project_stack for t in self.targets}
            with exclusive_run(
                self.settings.backend_url, self.spec.name, command, stacks, self.options.break_lock
            ) as notes:
                for note in notes:
                    self.progress.message(f"{self.spec.name}: {note}")
                return method(self, *args, **kwargs)

        return run

    return wrap


class Fleet:
    def __init__(
        self,
        spec: FleetSpec,
        targets: Sequence[Target],
        options: FleetOptions,
        progress: Progress | None = None,
    ) -> None:
        self.spec = spec
        self.options = options
        check_stage(options.stage, options.shard)
        if options.shard:
            from npa_pulumi.plan.shards import parse_shard, select_shard

            # Idempotent: the CLI selected the shard already; an SDK caller may only have set the option.
            targets = select_shard(targets, parse_shard(options.shard))
        self.targets = list(targets)
        self.progress = progress or Progress(enabled=options.show_progress)
        self.settings = EngineSettings.resolve(options.backend, options.passphrase_file)
        self._cloud: CloudPort | None = None
        self._plans: FleetPlans | None = None
        self._outputs: dict[str, dict[str, Any] | None] = {}
        self._unchanged_clusters: set[str] | None = None
        self._toolchain: ToolchainVersions | None = None
        self._fingerprints: dict[str, str] = {}
        self._policy_identity: str | None = None
        packs = [str(builtin_policy_pack()), *options.policy_packs]
        # Pulumi pairs configs with packs by position; one file keyed by policy name serves every pack
        # (a pack ignores entries for policies it does not have).
        configs = [options.policy_config] * len(packs) if options.policy_config else []
        self.provider_host = (
            SharedProviderHost(
                self.settings.env,
                self.settings.work_dir,
                logs_dir(spec.name) / "provider-host.log",
                policy_packs=[str(builtin_policy_pack())],  # the product's own; others run as before
            )
            if enabled()
            else None
        )
        self.executor = StackExecutor(
            self.settings,
            self.progress,
            logs_dir(spec.name),
            packs,
            configs,
            break_lock=options.break_lock,
            provider_host=self.provider_host,
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

    # ----------------------------------------------------------------------------------- context

    @property
    def cloud(self) -> CloudPort:
        if self._cloud is None:
            from npa_pulumi.cloud.factory import make_cloud

            kind: CloudKind = "nebius" if self.options.cloud == "nebius" else "local"
            # The spec's tenant: a credentials file needs it, and a profile of another tenant is refused.
            pinned = {"tenant_id": self.spec.tenant_id} if kind == "nebius" and self.spec.tenant_id else {}
            self._cloud = make_cloud(
                kind, profile=self.profile or None, region=self.spec.region or None, **pinned
            )
        return self._cloud

    @property
    def profile(self) -> str:
        return self.options.profile or self.spec.profile or ""

    def tenant_id(self) -> str:
        return self.spec.tenant_id or self.cloud.principal().tenant_id

    def resolve_regions(self) -> None:
        """Give targets without a region (none in the spec or their project) the one the profile's
        configuration points at (`CloudPort.default_region`), as docs/spec.md promises."""
        missing = [t for t in self.targets if not t.region]
        if not missing:
            return
        region = self.cloud.default_region()
        if not region:
            raise UserInputError(
                f"no region for {', '.join(t.cluster_stack for t in missing)}: set `region` in the spec or "
                f"the project; the {self.options.cloud} profile's configuration names none (for Nebius, the "
                "region of the profile's parent-id project)"
            )
        self.progress.message(
            f"{self.spec.name}: region {region}, from the profile's configuration, for "
            f"{len(missing)} cluster(s) whose spec names none"
        )
        self.targets = [t if t.region else t.model_copy(update={"region": region}) for t in self.targets]

    def plans(self) -> FleetPlans:
        if self._plans is None:
            self.resolve_regions()
            tenant = self.tenant_id()
            # Dynamic providers run in the engine's provider process; they learn the tenant from here.
            self.settings.extra_env[TENANT_ENV] = tenant
            in_cluster = self.cloud.kubernetes_api_available()
            self._plans = build_plans(self.spec, self.targets, self.options, tenant, in_cluster)
            for warning in self._plans.warnings:
                self.progress.message(warning)
        return self._plans

    def toolchain(self) -> ToolchainVersions:
        if self._toolchain is None:
            self._toolchain = toolchain_versions()
        return self._toolchain

    def policy_identity(self) -> str:
        if self._policy_identity is None:
            self._policy_identity = policy_identity(self.executor.policy_packs, self.options.policy_config)
        return self._policy_identity

    def fingerprint(self, plan: ProjectPlan | ClusterPlan) -> str:
        """What the stack of `plan` records as deployed from (engine/fingerprint.py)."""
        if plan.stack not in self._fingerprints:
            versions = self.toolchain().covering(terraform=isinstance(plan, ClusterPlan))
            versions["policies"] = self.policy_identity()
            self._fingerprints[plan.stack] = fingerprint(plan, self.options.cloud, self.profile, versions)
        return self._fingerprints[plan.stack]

    def _result(self, command: str) -> FleetResult:
        return FleetResult(
            command=command,
            fleet=self.spec.name,
            cloud=self.options.cloud,
            backend=self.settings.backend_url,
            shard=self.options.shard,
        )

    def _project_op(self, plan: ProjectPlan) -> StackOp:
        return StackOp(
            plan.stack,
            "project",
            plan.project_key,
            None,
            project_program(plan, self.options.cloud, self.profile, self.fingerprint(plan)),
            stack_tags(plan.fleet, plan.project_key, None),
            tags_needed=self._needs_tags(plan.stack),
        )

    def _cluster_op(self, plan: ClusterPlan, project_ready: bool = True) -> StackOp:
        return StackOp(
            plan.stack,
            "cluster",
            plan.project_key,
            plan.cluster_name,
            cluster_program(plan, self.options.cloud, self.profile, project_ready, self.fingerprint(plan)),
            stack_tags(plan.fleet, plan.project_key, plan.cluster_name),
            tags_needed=self._needs_tags(plan.stack),
            gate_state="" if plan.health_gate is None else validating_state(plan.mig_enabled, plan.has_gpus),
        )

    def _needs_tags(self, stack: str) -> bool:
        """Stacks npa-pulumi deployed before carry a fingerprint output and were tagged then."""
        outputs = self._outputs.get(stack)
        return not (outputs and FINGERPRINT_OUTPUT in outputs)

    def _retry_command(self, command: str, project_key: str, cluster: str | None) -> str:
        spec = self.options.spec_path or "<fleet.yaml>"
        parts = [f"npa-pulumi {command} --spec {spec} --cloud {self.options.cloud}"]
        if self.options.backend:
            # Quoted: an s3:// URL carries `&` between its query parameters.
            parts.append(f"--backend {shlex.quote(self.options.backend)}")
        if self.options.passphrase_file:
            parts.append(f"--passphrase-file {shlex.quote(self.options.passphrase_file)}")
        parts.append(f"--only-projects {project_key}")
        if cluster:
            parts.append(f"--only-clusters {cluster}")
        parts.append("--yes")
        return " ".join(parts)

    # ------------------------------------------------------------------------------ skip logic

    def stack_outputs(
        self, ops: Sequence[StackOp], refresh: bool = False
    ) -> dict[str, dict[str, Any] | None]:
        """Outputs of each stack (None when it does not exist), read in parallel and cached."""
        wanted = [op for op in ops if refresh or op.stack not in self._outputs]
        if wanted:
            with ThreadPoolExecutor(max_workers=max(1, self.options.concurrency)) as pool:
                for op, outputs in zip(wanted, pool.map(self.executor.outputs, wanted), strict=True):
                    self._outputs[op.stack] = outputs
        return {op.stack: self._outputs.get(op.stack) for op in ops}

    def _fingerprint_matches(self, plan: ProjectPlan | ClusterPlan, outputs: dict[str, Any] | None) -> bool:
        matches = outputs is not None and outputs.get(FINGERPRINT_OUTPUT) == self.fingerprint(plan)
        # A run killed after the engine wrote the outputs but before it released the lock leaves a
        # matching fingerprint behind a stale lock: run such a stack, so the lock is recovered.
        return matches and not interrupted(self.settings.backend_url, plan.stack, PROJECT_NAME)

    def _project_live(self, outputs: dict[str, Any]) -> bool:
        from npa_pulumi.cloud.errors import CloudError

        try:
            project = self.cloud.get_project(str(outputs.get("project_id")))
            self.cloud.get_subnet(str(outputs.get("subnet_id")))
            if outputs.get("bucket_id"):
                self.cloud.get_bucket(str(outputs["bucket_id"]))
        except CloudError:
            return False
        return project.state == "ACTIVE"

    def _cluster_live(self, outputs: dict[str, Any]) -> bool:
        from npa_pulumi.cloud.errors import CloudError

        cluster_id = outputs.get("cluster_id")
        if not cluster_id:
            return False
        if outputs.get("lifecycle", "deployed") != "deployed":
            return False  # a failed gate or missing credentials: `up` runs the stack again (only the gate)
        try:
            cluster = self.cloud.get_cluster(str(cluster_id))
            groups = self.cloud.list_node_groups(cluster.id)
            if self.drift(outputs):
                return False  # an object the recipe made was deleted or resized outside the fleet
        except CloudError:
            return False
        return cluster.state == "RUNNING" and all(
            g.state == "RUNNING" and g.ready_node_count >= g.target_node_count for g in groups
        )

    def drift(self, outputs: dict[str, Any]) -> list[Drift]:
        """The objects a cluster stack's recipe declared (its `live_objects` output) that the cloud no longer
        has or that differ from the spec; empty when the recipe declares none (npa_pulumi/bridge/drift.py).
        Cloud errors other than NotFound propagate."""
        from npa_pulumi.bridge.drift import declared_objects, live_drift

        declared = declared_objects({LIVE_OBJECTS_OUTPUT: outputs.get("live_objects")})
        if not declared:
            return []
        return live_drift(self.cloud, str(outputs.get("project_id") or ""), declared)

    def deleted_cluster_drift(self, outputs: dict[str, Any]) -> list[dict[str, str]]:
        """The drift of a cluster the cloud no longer has: every object its recipe declared that went with
        it, or the cluster alone when the recipe declares none (or the check cannot run)."""
        try:
            found = [d.as_dict() for d in self.drift(outputs)]
        except CloudError:
            found = []
        cluster = {"address": "", "kind": "cluster", "id": str(outputs.get("cluster_id") or "")}
        return found or [{**cluster, "reason": "deleted outside the fleet"}]

    def _needs_refresh(self, stack: str) -> bool:
        """A deployed cluster stack whose live objects do not match what it recorded: its update must
        refresh first, so the Terraform bridge sees the drift (an unchanged spec alone makes no diff)."""
        outputs = self._outputs.get(stack)
        if not outputs or not outputs.get("cluster_id"):
            return False
        # A failed gate is retried by a plain update; its objects may still have drifted: check them too.
        return not self._cluster_live({**outputs, "lifecycle": "deployed"})

    def unchanged_projects(self) -> set[str]:
        plans = self.plans().projects
        outputs = self.stack_outputs([self._project_op(p) for p in plans])
        return {
            p.stack
            for p in plans
            if self._fingerprint_matches(p, outputs[p.stack]) and self._project_live(outputs[p.stack] or {})
        }

    def unchanged_clusters(self) -> set[str]:
        """Cluster stacks deployed from exactly the current plan, whose identity still matches their project
        stack and whose live cluster and node groups all run: nothing for `up` to do, no new quota."""
        if self._unchanged_clusters is None and not self._any_cluster_deployed():
            self._unchanged_clusters = set()  # nothing to compare: spare planning (preflight of a new fleet)
        if self._unchanged_clusters is None:
            plans = self.plans()
            project_outputs = self.stack_outputs([self._project_op(p) for p in plans.projects])
            outputs = self.stack_outputs([self._cluster_op(c) for c in plans.clusters])
            unchanged = set()
            for plan in plans.clusters:
                mine, project = outputs[plan.stack], project_outputs.get(plan.project_stack)
                if not (mine and project and self._fingerprint_matches(plan, mine)):
                    continue
                same_identity = mine.get("project_id") == project.get("project_id") and mine.get(
                    "subnet_id"
                ) == (plan.subnet_id or project.get("subnet_id"))
                if same_identity and self._cluster_live(mine):
                    unchanged.add(plan.stack)
            self._unchanged_clusters = unchanged
        return self._unchanged_clusters

    def _any_cluster_deployed(self) -> bool:
        """Whether any selected cluster stack carries a fingerprint (was deployed by npa-pulumi)."""
        ops = [
            StackOp(t.cluster_stack, "cluster", t.project_key, t.cluster_name, None, {}) for t in self.targets
        ]
        return any(FINGERPRINT_OUTPUT in (out or {}) for out in self.stack_outputs(ops).values())

    def _unchanged_result(self, op: StackOp) -> StackResult:
        outputs = self._outputs.get(op.stack) or {}
        self.progress.add(op.stack)
        self.progress.phase(op.stack, "unchanged", "inputs and live state match; skipped")
        return op.result(
            "unchanged",
            project_id=outputs.get("project_id"),
            cluster_id=outputs.get("cluster_id"),
            kube_context=outputs.get("kube_context"),
        )

    # ------------------------------------------------------------------------------------ pools

    def _pool(self, ops: Sequence[StackOp], work: Callable[[StackOp], StackResult]) -> list[StackResult]:
        """Run `work` over `ops` with the configured concurrency; with fail-fast, stop scheduling after
        the first failure and report the rest as skipped."""
        results: dict[str, StackResult] = {}
        pending = list(ops)
        for op in pending:
            self.progress.add(op.stack)
        stop = False
        with ThreadPoolExecutor(max_workers=max(1, self.options.concurrency)) as pool:
            running: dict[Future[StackResult], StackOp] = {}
            try:
                while pending or running:
                    while pending and not stop and len(running) < max(1, self.options.concurrency):
                        op = pending.pop(0)
                        running[pool.submit(work, op)] = op
                    if not running:
                        break
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        op = running.pop(future)
                        try:
                            result = future.result()
                        except NpaError as err:
                            result = op.result("failed", error=str(err))
                        except Exception as err:
                            log.exception("stack %s failed unexpectedly", op.stack)
                            result = op.result("failed", error=f"{type(err).__name__}: {err}")
                        results[op.stack] = result
                        if result.failed and self.options.fail_fast:
                            stop = True
            except KeyboardInterrupt:
                stop = True
                pending.clear()
                self.progress.message("interrupted: waiting for running stacks to stop cleanly ...")
                for future, op in running.items():
                    try:
                        results[op.stack] = future.result()
                    except Exception as err:
                        results[op.stack] = op.result("failed", error=f"interrupted: {err}")
                raise
        for op in pending:
            results[op.stack] = op.result(
                "skipped", error="not started: an earlier target failed (--fail-fast)"
            )
            self.progress.phase(op.stack, "skipped")
        return [results[op.stack] for op in ops if op.stack in results]

    # --------------------------------------------------------------------------------- commands

    @_hosted
    def preview(self, preflight: Callable[[FleetPlans], dict[str, Any] | None] | None = None) -> FleetResult:
        """Pulumi's preview of every stack, except those provably unchanged: deployed from exactly this plan
        (the fingerprint covers the policy packs too), live as they recorded (no drift), and with the policy
        results of an engine run over that plan on this machine (engine/policy_results.py), which the
        skipped preview reports. `--refresh` previews every stack."""
        result = self._result("preview")
        plans = self.plans()
        result.warnings = list(plans.warnings)
        self.refuse_storage_without_mk8s(plans)
        if preflight is not None:
            result.preflight = preflight(plans)  # read-only: reported next to the changes, never blocking
        result.stacks.extend(plans.unsupported)
        project_ops = [self._project_op(p) for p in plans.projects]
        if self.options.stage != "clusters":
            skip_projects = set() if self.options.refresh else self.unchanged_projects()
            plan_of_project = {p.stack: p for p in plans.projects}
            skipped, to_run = self._skippable(project_ops, skip_projects, plan_of_project)
            result.stacks.extend(skipped)
            if to_run:
                self.warm_provider_host()
            result.stacks.extend(self._pool(to_run, lambda op: self._preview_stack(op, plan_of_project)))
            if to_run:
                # A project stack never deployed has no outputs yet (a preview creates the empty stack).
                self.stack_outputs(to_run, refresh=True)
                self._unchanged_clusters = None
        if self.options.stage == "projects":
            return result
        project_outputs = self.stack_outputs(project_ops)
        cluster_ops = [
            self._cluster_op(c, bool((project_outputs.get(c.project_stack) or {}).get("subnet_id")))
            for c in plans.clusters
        ]
        plan_of = {c.stack: c for c in plans.clusters}
        skip_clusters = set() if self.options.refresh else self.unchanged_clusters()
        skipped, cluster_ops = self._skippable(cluster_ops, skip_clusters, plan_of)
        result.stacks.extend(skipped)
        if cluster_ops:
            self.warm_provider_host()
        result.stacks.extend(
            self._pool(
                cluster_ops,
                lambda op: self._preview_cluster(
                    op, plan_of[op.stack], project_outputs.get(plan_of[op.stack].project_stack)
                ),
            )
        )
        self._fill_identity(result)
        return result

    def _skippable(
        self,
        ops: list[StackOp],
        unchanged: set[str],
        plans: Mapping[str, ProjectPlan | ClusterPlan],
    ) -> tuple[list[StackResult], list[StackOp]]:
        """(results of the unchanged stacks whose policy results are known, the ops that must run)."""
        from npa_pulumi.engine import policy_results

        skipped, run = [], []
        for op in ops:
            known = None
            if op.stack in unchanged:
                known = policy_results.load(
                    self.settings.backend_url, op.stack, self.fingerprint(plans[op.stack])
                )
            if known is None:
                run.append(op)
                continue
            item = self._unchanged_result(op)
            item.status, item.changes, item.policy = "no-changes", change_counts({}), known
            skipped.append(item)
        return skipped, run

    def _remember_policy(self, plan: ProjectPlan | ClusterPlan, result: StackResult) -> None:
        """After an engine run that left the stack as its plan says: its policy results, for previews."""
        from npa_pulumi.engine import policy_results
        from npa_pulumi.policies.catalog import NODE_GROUP_REPLACEMENT_POLICY

        # The replacement policy judges a Terraform plan, not the stack's plan: never replayed on a skip.
        kept = [v for v in result.policy if v.policy != NODE_GROUP_REPLACEMENT_POLICY]
        policy_results.store(self.settings.backend_url, plan.stack, self.fingerprint(plan), kept)

    def _preview_stack(self, op: StackOp, plans: Mapping[str, ProjectPlan]) -> StackResult:
        previewed = self.executor.run(op, "preview")
        if previewed.status == "no-changes":
            self._remember_policy(plans[op.stack], previewed)
        return previewed

    def _preview_drift(self, outputs: dict[str, Any] | None) -> list[dict[str, str]]:
        """What of a deployed cluster changed outside the fleet ([] when nothing, or when it cannot be
        read): a preview reports it, and Terraform's plan shows how `up` repairs it."""
        if not outputs or not outputs.get("cluster_id"):
            return []
        try:
            self.cloud.get_cluster(str(outputs["cluster_id"]))
            return [d.as_dict() for d in self.drift(outputs)]
        except NotFound:
            return self.deleted_cluster_drift(outputs)
        except CloudError:
            return []

    def _preview_cluster(
        self, op: StackOp, plan: ClusterPlan, project_outputs: dict[str, Any] | None
    ) -> StackResult:
        """Pulumi's preview, then Terraform's own plan where the bridge has work (its inputs changed, or
        every cluster with --refresh); what of a deployed cluster drifted. An unchanged cluster runs no
        terraform at all."""
        drift = self._preview_drift(self._outputs.get(op.stack))
        previewed = self.executor.run(op, "preview")
        bridge_changed = previewed.status == "changes" and (
            not previewed.diff or any(d.get("urn", "").endswith("-terraform") for d in previewed.diff)
        )
        if previewed.status == "no-changes" and not drift:
            self._remember_policy(plan, previewed)
        if drift and not previewed.failed:
            # The engine's preview compares inputs only: a cluster changed behind the fleet's back is
            # reported from the live check, as `refresh` and `status` report it (`up` refreshes and repairs).
            previewed.drift, previewed.status = drift, "changes"
            previewed.error = "; ".join(
                f"{d['kind'].replace('_', ' ')} {d['id']} {d['reason']}" for d in drift
            )
            previewed.error += "; up brings it back to the spec"
        if previewed.failed or not (bridge_changed or self.options.refresh):
            return previewed
        self.progress.phase(op.stack, "terraform plan")
        terraform = self._terraform_plan(op, plan, project_outputs)
        replacements = self._replacement_policy_config(terraform)
        if replacements is not None:
            # The policies ran before Terraform's plan was known: preview again with the planned node-group
            # replacements in the gpu-node-group-replacement policy's config (only in this, rare, case).
            again = self.executor.run(dataclasses.replace(op, policy_config=replacements), "preview")
            if drift and not again.failed:
                again.drift, again.status, again.error = previewed.drift, previewed.status, previewed.error
            previewed = again
        previewed.terraform = terraform
        self.progress.phase(op.stack, "done", previewed.status)
        return previewed

    def _terraform_plan(
        self, op: StackOp, plan: ClusterPlan, project_outputs: dict[str, Any] | None
    ) -> dict[str, Any]:
        """Terraform's own plan for the cluster, summarized (components/terraform_module.plan_preview);
        read-only. A failure is reported in the summary, never raised: the preview or update stands."""
        subnet_id = plan.subnet_id or (project_outputs or {}).get("subnet_id")
        project_id = (project_outputs or {}).get("project_id")
        if not (subnet_id and project_id):
            return {"skipped": "the project stack is not deployed yet: no Terraform plan"}
        from npa_pulumi.components.terraform_module import plan_preview

        props = {
            "cloud": self.options.cloud,
            "profile": self.profile,
            "fleet": plan.fleet,
            "project_key": plan.project_key,
            "cluster": plan.cluster_name,
            "work_key": plan.stack,
            "identity": {
                "tenant_id": plan.tenant_id,
                "parent_id": project_id,
                "region": plan.region,
                "subnet_id": subnet_id,
            },
            "tfvars": plan.tfvars,
            "runtime_tfvars": plan.runtime_tfvars,
            "recipe": plan.recipe,
        }
        try:
            # Read through the cache: `up` has just read these outputs, a preview's cluster op too.
            deployed = bool((self.stack_outputs([op])[op.stack] or {}).get("cluster_id"))
            return plan_preview(props, deployed=deployed, stored_state=lambda: self._stored_tf_state(op))
        except NpaError as err:
            return {"error": f"terraform plan failed: {err}"}
        except Exception as err:  # the recipe or the cloud refused: reported, the preview itself stands
            log.exception("terraform plan for %s failed", op.stack)
            return {"error": f"terraform plan failed: {type(err).__name__}: {err}"}

    def _stored_tf_state(self, op: StackOp) -> str | None:
        """The Terraform state the bridge keeps in the stack (a secret output), for a machine without the
        stack's work dir."""
        from npa_pulumi.policies.catalog import TERRAFORM_MODULE

        state = self.executor.resource_output(op, TERRAFORM_MODULE, "tf_state")
        return state if isinstance(state, str) and state else None

    @staticmethod
    def _replacement_policy_config(terraform: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
        """The gpu-node-group-replacement policy's config entry for a plan that replaces node groups."""
        from npa_pulumi.bridge.plan_summary import replaced_node_group_addresses
        from npa_pulumi.policies.catalog import NODE_GROUP_REPLACEMENT_POLICY

        addresses = replaced_node_group_addresses(terraform)
        if not addresses:
            return None
        return {NODE_GROUP_REPLACEMENT_POLICY: {"planned_replacements": addresses}}

    @functools.cached_property
    def _replacement_policy_enabled(self) -> bool:
        """Whether the user's --policy-config leaves the gpu-node-group-replacement policy on."""
        from npa_pulumi.policies.catalog import NODE_GROUP_REPLACEMENT_POLICY

        if not self.options.policy_config:
            return True
        try:
            config = json.loads(Path(self.options.policy_config).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return True  # the engine reports an unreadable config itself
        if not isinstance(config, dict):
            return True
        entry = config.get(NODE_GROUP_REPLACEMENT_POLICY, config.get("all"))
        level = entry.get("enforcementLevel") if isinstance(entry, dict) else entry
        return level != "disabled"

    @_hosted
    @_exclusive("up")
    def up(self, preflight: Callable[[FleetPlans], dict[str, Any] | None] | None = None) -> FleetResult:
        result = self._result("up")
        plans = self.plans()
        result.warnings = list(plans.warnings)
        self.refuse_storage_without_mk8s(plans)
        missing = [] if self.options.create_projects else self._missing_projects(plans)
        if missing:
            # Every project stack would fail on its own, after others had run; stop before any of them.
            result.error = (
                f"project(s) {', '.join(missing)} do not exist in tenant {self.tenant_id()} and "
                "--no-create-projects is set: nothing was created or changed (create them, give their "
                "project_id in the spec, or drop --no-create-projects)"
            )
            return result
        if self.options.stage == "clusters":
            undeployed = self.undeployed_projects(plans)
            if undeployed:
                # Every cluster stack of such a project would fail on its missing network: stop first.
                result.error = (
                    f"--stage clusters: project stack(s) {', '.join(undeployed)} not deployed; nothing was "
                    "created or changed. Run `npa-pulumi up --stage projects` (once, unsharded) first"
                )
                return result
        if preflight is not None:
            report = preflight(plans)
            result.preflight = report
            if report is not None and not report.get("ok", False):
                result.error = (
                    "preflight failed: the fleet does not fit the tenant's quota or reserved capacity"
                )
                return result
        result.stacks.extend(plans.unsupported)
        failed_projects = set() if self.options.stage == "clusters" else self._up_projects(plans, result)
        if self.options.stage != "projects":
            self._up_clusters(plans, result, failed_projects)
        for stack in result.stacks:
            if stack.failed and stack.retry_command is None:
                stack.retry_command = self._retry_command("up", stack.project_key, stack.cluster_name)
        self._fill_identity(result)
        for stack in result.clusters():
            if stack.status in ("deployed", "unchanged") and stack.cluster_id:
                self._write_kubeconfig(stack)
                self._apply_lifecycle(stack)
        return result

    def undeployed_projects(self, plans: FleetPlans) -> list[str]:
        """Project stacks of the selection with no deployed network (missing, or never completed): what the
        clusters stage refuses to build on. A project stack deployed from another spec only warns: its
        outputs (project, subnet) are what the cluster stacks read, and they exist."""
        outputs = self.stack_outputs([self._project_op(p) for p in plans.projects])
        missing = []
        for plan in plans.projects:
            found = outputs.get(plan.stack) or {}
            if not (found.get("project_id") and found.get("subnet_id")):
                missing.append(plan.stack)
            elif found.get(FINGERPRINT_OUTPUT) != self.fingerprint(plan):
                self.progress.message(
                    f"{plan.stack}: deployed from another spec than this one; the clusters stage does not "
                    "update it (run `npa-pulumi up --stage projects` for that)"
                )
        return missing

    def _up_projects(self, plans: FleetPlans, result: FleetResult) -> set[str]:
        """The project stacks of `up` (changed ones only); returns the keys of the projects that failed."""
        skip_projects = set() if self.options.refresh else self.unchanged_projects()
        project_ops = [self._project_op(p) for p in plans.projects]
        result.stacks.extend(self._unchanged_result(op) for op in project_ops if op.stack in skip_projects)
        changed_projects = [op for op in project_ops if op.stack not in skip_projects]
        if changed_projects:
            self.warm_provider_host()
        with self._creating_cluster_stacks(plans.clusters if changed_projects else []):
            project_results = self._pool(changed_projects, self._up_project)
        result.stacks.extend(project_results)
        if changed_projects:
            # Cluster stacks read these outputs; re-read what the updates just wrote.
            self.stack_outputs(changed_projects, refresh=True)
            self._unchanged_clusters = None
        return {r.project_key for r in project_results if r.failed}

    def _up_clusters(self, plans: FleetPlans, result: FleetResult, failed_projects: set[str]) -> None:
        skip_clusters = set() if self.options.refresh else self.unchanged_clusters()
        cluster_ops: list[StackOp] = []
        for cluster in plans.clusters:
            op = self._cluster_op(cluster)
            if cluster.project_key in failed_projects:
                result.stacks.append(
                    op.result(
                        "skipped",
                        error=f"project stack {cluster.project_stack} failed; cluster not attempted",
                    )
                )
            elif op.stack in skip_clusters:
                result.stacks.append(self._unchanged_result(op))
            else:
                cluster_ops.append(op)
        if cluster_ops:
            self.warm_provider_host()
        if not (failed_projects and self.options.fail_fast):
            result.stacks.extend(self._pool(cluster_ops, lambda op: self._up_cluster(op)))

    @contextlib.contextmanager
    def _creating_cluster_stacks(self, clusters: Sequence[ClusterPlan]) -> Iterator[None]:
        """While the project stacks update, create the cluster stacks that do not exist yet (a `stack init`,
        an engine start each, ~0.3 s) instead of after them, with what concurrency the project stacks leave.
        A cluster stack whose project then fails stays empty, as a preview's does."""
        absent = [
            op
            for op in (self._cluster_op(c) for c in clusters)
            if checkpoint_outputs(self.settings.backend_url, op.stack, PROJECT_NAME) is None
        ]
        if not absent:
            yield
            return

        def create(op: StackOp) -> None:
            try:
                self.executor.select(op, create=True)
            except Exception as err:  # the stack's own run creates it, and reports what fails
                log.debug("creating %s ahead of its run failed: %s", op.stack, err)

        with ThreadPoolExecutor(max_workers=max(1, self.options.concurrency)) as pool:
            futures = [pool.submit(create, op) for op in absent]
            try:
                yield
            finally:
                wait(futures)

    def _apply_lifecycle(self, stack: StackResult) -> None:
        """The cluster's state as its stack recorded it: `deployed` only when the health gate passed
        (or was skipped on purpose); the gate's evidence goes into the result."""
        outputs = stack.outputs or self._outputs.get(stack.stack) or {}
        stack.validation = outputs.get("validation") or stack.validation
        evidence = outputs.get("health_evidence")
        if isinstance(evidence, dict):
            stack.health = evidence
        if isinstance(outputs.get("kuberay"), dict):  # the KubeRay gate's summary (engine/programs.py)
            stack.kuberay = outputs["kuberay"]
        lifecycle = outputs.get("lifecycle")
        if lifecycle in FAILED_LIFECYCLES and not stack.failed:
            stack.status = lifecycle
            reason = evidence.get("reason", "") if isinstance(evidence, dict) else ""
            stack.error = f"the cluster is kept; its health gate did not pass: {reason}"
            stack.retry_command = self._retry_command("up", stack.project_key, stack.cluster_name)

    def _write_kubeconfig(self, stack: StackResult) -> None:
        """The cluster's kubeconfig and registration for its users (see engine/kubeconfigs.py)."""
        from npa_pulumi.engine import kubeconfigs

        plan = self.plans().cluster(stack.stack)
        if not plan.in_cluster or not stack.kube_context or not stack.cluster_id:
            return
        try:
            registration = kubeconfigs.write(
                self.cloud,
                context=stack.kube_context,
                stack=stack.stack,
                fleet=plan.fleet,
                project_key=plan.project_key,
                project_id=stack.project_id or "",
                cluster_name=plan.cluster_name,
                cluster_id=stack.cluster_id,
                cloud=self.options.cloud,
                profile=self.profile,
            )
        except (NpaError, CloudError) as err:
            stack.status = "deployed-credentials-failed"
            stack.error = f"the cluster is deployed, but its kubeconfig could not be written: {err}"
            stack.retry_command = self._retry_command("up", stack.project_key, stack.cluster_name)
            return
        stack.kubeconfig = registration.kubeconfig

    def refuse_storage_without_mk8s(self, plans: FleetPlans) -> None:
        """Object storage on a project whose selected clusters are all soperator (not deployable yet) is
        refused, located in the spec, before anything is touched: the original tool failed closed too."""
        if not plans.storage_without_mk8s:
            return
        from npa_pulumi.spec.errors import SpecError, SpecProblem

        source = self.options.spec_path or "<spec>"
        index = None
        if self.options.spec_path:
            from npa_pulumi.spec.yaml_source import load_yaml, read_spec_text

            with contextlib.suppress(NpaError, OSError):
                index = load_yaml(read_spec_text(self.options.spec_path), source)[1]
        problems = []
        for position in plans.storage_without_mk8s:
            mark = index.exact(("projects", position, "object_storage")) if index else None
            problems.append(
                SpecProblem(
                    path=f"projects[{position}].object_storage",
                    line=mark[0] if mark else None,
                    column=mark[1] if mark else None,
                    message="object storage needs at least one selected mk8s cluster in its project; this "
                    "project's selected clusters are all soperator, which npa-pulumi does not deploy yet "
                    "(nothing was created or changed)",
                    hint="select an mk8s cluster of this project, or remove object_storage",
                )
            )
        raise SpecError(problems, source)

    def _missing_projects(self, plans: FleetPlans) -> list[str]:
        """Named projects of the selection that the tenant does not have (one listing of the tenant)."""
        named = [p for p in plans.projects if not p.project_id]
        if not named:
            return []
        existing = {project.name for project in self.cloud.list_projects(self.tenant_id())}
        return [f"{p.display_name!r}" for p in named if p.display_name not in existing]

    def _up_project(self, op: StackOp) -> StackResult:
        """A project stack. A deployed one whose network or bucket is gone refreshes first, so its update
        creates them again (an unchanged spec alone makes no diff). Single-flight across shards: a shard
        that finds it locked by another run waits for that run to finish it (polling its lock), then runs it
        itself, which finds nothing to change when the other shard deployed the same plan. Unsharded, a
        locked stack fails at once."""
        outputs = self._outputs.get(op.stack)
        drifted = bool(outputs and outputs.get("project_id")) and not self._project_live(outputs or {})
        refresh = self.options.refresh or drifted

        def once() -> StackResult:
            return self.executor.run(op, "up", refresh=True) if refresh else self.executor.run(op, "up")

        result = once()
        if not result.failed:
            self._remember_policy(self._project_plan(op.stack), result)
        if not self.options.shard:
            return result
        if result.failed and not result.locked and outputs is None:
            # Shards creating the same new project stack at the same instant can trip over each other's
            # `stack init` and first write (a DIY backend has no atomic create); a second attempt finds the
            # stack and its lock, and waits for the other shard as below. A real failure fails again.
            self.progress.message(f"{op.stack}: failed while new ({result.error}); retrying once")
            time.sleep(2.0)
            result = once()
        deadline = time.monotonic() + self.options.shard_wait_s
        while result.locked and time.monotonic() < deadline:
            self.progress.message(f"{op.stack}: held by another run (another shard?); waiting for it")
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
            result = once()
        return result

    def _up_cluster(self, op: StackOp) -> StackResult:
        if self.options.refresh or self._needs_refresh(op.stack):
            # Drift repair brings the cluster back to the spec; the refresh changes what a plan would say.
            result = self.executor.run(op, "up", refresh=True)
        else:
            terraform = self._plan_before_update(op)
            if terraform is not None:
                op = dataclasses.replace(op, policy_config=self._replacement_policy_config(terraform))
            result = self.executor.run(op, "up")
            if terraform is not None and terraform.get("resources"):
                result.terraform = terraform
        if not result.failed:
            self._remember_policy(self.plans().cluster(op.stack), result)
        return result

    def _plan_before_update(self, op: StackOp) -> dict[str, Any] | None:
        """Terraform's plan for a deployed cluster about to change, so the gpu-node-group-replacement
        policy judges the update (and, made mandatory, stops it before anything is replaced). A new
        cluster has nothing to replace, and a disabled policy needs no plan: both skip it."""
        outputs = self.stack_outputs([op])[op.stack]
        if not (outputs and outputs.get("cluster_id")) or not self._replacement_policy_enabled:
            return None
        plan = self.plans().cluster(op.stack)
        project_outputs = self._outputs.get(plan.project_stack)
        self.progress.phase(op.stack, "terraform plan")
        return self._terraform_plan(op, plan, project_outputs)

    def _project_plan(self, stack: str) -> ProjectPlan:
        return next(p for p in self.plans().projects if p.stack == stack)

    def teardown_plan(self, teardown: TeardownOptions | None = None) -> FleetResult:
        """`destroy --dry-run`: every phase of the teardown with what it would delete or retain and why.
        Reads stack outputs and the live cloud; changes nothing (engine/teardown.py)."""
        from npa_pulumi.engine.teardown import Teardown, TeardownOptions

        result = self._result("destroy")
        result.dry_run = True
        plans = self.plans()
        result.warnings = list(plans.warnings)
        result.phases = Teardown(self, teardown or TeardownOptions()).plan()
        return result

    @_hosted
    @_exclusive("destroy")
    def destroy(self, teardown: TeardownOptions | None = None, resumed: Receipt | None = None) -> FleetResult:
        """Ordered teardown: cluster stacks, then (once none of its clusters remain) each project stack with
        an owned network, then the opt-in bucket, storage identity and project phases; a receipt records
        every phase (engine/teardown.py). `resumed`: the receipt this run continues (`destroy --receipt`),
        whose completed phases stay completed."""
        from npa_pulumi.engine.resume import carry_completed
        from npa_pulumi.engine.teardown import (
            Teardown,
            TeardownOptions,
            new_receipt_path,
            receipt_document,
            resume_command,
            write_receipt,
        )

        options = teardown or TeardownOptions()
        started = time.time()
        result = self._result("destroy")
        plans = self.plans()
        result.warnings = list(plans.warnings)
        result.stacks.extend(plans.unsupported)
        run = Teardown(self, options)
        result.phases = run.plan()
        path = new_receipt_path(self.spec.name)
        result.receipt, result.receipt_id = str(path), path.stem
        result.resumes = resumed.id if resumed else None

        def record(outcome: str) -> None:
            document = receipt_document(self, options, result.phases, started, outcome, path, result.resumes)
            write_receipt(self.spec.name, document, path)

        record("running")  # before anything is deleted: a killed run still leaves its record
        try:
            run.run(result, result.phases)
        finally:
            if resumed is not None:
                result.phases = carry_completed(resumed, result.phases)
            if result.partial_cleanup:
                spec_path = str(Path(self.options.spec_path).resolve()) if self.options.spec_path else None
                result.resume_command = resume_command(path.stem, result.phases, spec_path)
            record(result.outcome)
        for item in result.stacks:
            if item.kind == "project" and item.status == "destroyed":
                item.outputs["retained"] = "; ".join(
                    f"{p.phase}: {p.reason}"
                    for p in result.phases
                    if p.stack == item.stack and p.status == "retained"
                )
        return result

    def cleanup_plan(self, teardown: TeardownOptions) -> FleetResult:
        """`cleanup --dry-run`: what the fleet created that no stack references any more (read-only)."""
        from npa_pulumi.engine.cleanup import run_cleanup

        result = self._result("cleanup")
        run_cleanup(self, teardown, True, result)
        return result

    @_hosted
    @_exclusive("cleanup")
    def cleanup(self, teardown: TeardownOptions) -> FleetResult:
        """Delete the fleet's orphans through the teardown's guarded phases (engine/cleanup.py)."""
        from npa_pulumi.engine.cleanup import run_cleanup

        result = self._result("cleanup")
        run_cleanup(self, teardown, False, result)
        return result

    @_hosted
    @_exclusive("refresh")
    def refresh(self) -> FleetResult:
        result = self._result("refresh")
        plans = self.plans()
        result.warnings = list(plans.warnings)
        ops: list[StackOp] = []
        if self.options.shard and self.options.stage is None:
            # Shards share project stacks; two refreshing one would collide on its lock. They are
            # refreshed once, by an unsharded run (or `refresh --stage projects`).
            result.warnings.append(
                f"shard {self.options.shard}: only cluster stacks are refreshed; refresh the project stacks "
                "once with `npa-pulumi refresh --stage projects`"
            )
        elif self.options.stage != "clusters":
            ops += [self._project_op(p) for p in plans.projects]
        if self.options.stage != "projects":
            ops += [self._cluster_op(c) for c in plans.clusters]
        result.stacks.extend(self._pool(ops, self._refresh_stack))
        return result

    def _refresh_stack(self, op: StackOp) -> StackResult:
        """Pulumi's refresh, and for a cluster stack what drifted in the cloud (what `up` repairs)."""
        refreshed = self.executor.run(op, "refresh")
        if op.kind != "cluster" or refreshed.failed:
            return refreshed
        outputs = self.executor.outputs(op) or {}
        if not outputs.get("cluster_id"):
            return refreshed
        try:
            self.cloud.get_cluster(str(outputs["cluster_id"]))
            drift = [d.as_dict() for d in self.drift(outputs)]
        except NotFound:
            drift = self.deleted_cluster_drift(outputs)
        except CloudError as err:
            refreshed.error = f"could not check the live cluster for drift: {err}"
            return refreshed
        if drift:
            refreshed.status, refreshed.drift = "drifted", drift
            refreshed.error = "; ".join(
                f"{d['kind'].replace('_', ' ')} {d['id']} {d['reason']}" for d in drift
            )
            refreshed.error += "; run up to bring it back to the spec"
        return refreshed

    def status(self) -> FleetResult:
        from npa_pulumi.engine.status import cluster_status

        result = self._result("status")
        plans = self.plans()
        result.warnings = list(plans.warnings)
        result.stacks.extend(plans.unsupported)
        ops = [self._cluster_op(c) for c in plans.clusters]
        started = time.monotonic()
        result.stacks.extend(self._pool(ops, lambda op: cluster_status(self, op)))
        log.debug("status took %.1fs", time.monotonic() - started)
        return result

    def kubeconfigs(self) -> list[dict[str, str]]:
        """For every selected cluster: its stack, context and cluster id, plus `kubeconfig` (YAML, fresh
        credentials from the cloud) when its stack is deployed; what `npa-pulumi kubeconfig` prints."""
        from npa_pulumi.engine import kubeconfigs

        ops = [
            StackOp(t.cluster_stack, "cluster", t.project_key, t.cluster_name, None, {}) for t in self.targets
        ]
        outputs = self.stack_outputs(ops)
        found = []
        for target in self.targets:
            context = kube_context_name(self.spec.name, target.project_key, target.cluster_name)
            cluster_id = str((outputs.get(target.cluster_stack) or {}).get("cluster_id") or "")
            entry = {"stack": target.cluster_stack, "context": context, "cluster_id": cluster_id}
            if cluster_id:
                entry["kubeconfig"] = kubeconfigs.kubeconfig_text(self.cloud, cluster_id, context)[0]
            found.append(entry)
        return found

    def _fill_identity(self, result: FleetResult) -> None:
        """Give every cluster entry its project id and kube context when the stacks know them."""
        # The clusters stage runs no project stack: their outputs, read before, name the project.
        project_ids = {
            p.project_key: str((self._outputs.get(p.stack) or {}).get("project_id") or "") or None
            for p in self.plans().projects
        }
        project_ids.update(
            {s.project_key: s.project_id for s in result.stacks if s.kind == "project" and s.project_id}
        )
        for stack in result.stacks:
            if stack.kind == "cluster":
                stack.project_id = stack.project_id or project_ids.get(stack.project_key)
