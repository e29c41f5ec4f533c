"""The fleet's façade: one object per command over the selected targets, whose methods are the operations.

    fleet = Fleet(spec, targets, UpRequest(where=Where(cloud="local"), concurrency=4))
    result = fleet.up()        # or preview / destroy / status / refresh / verify / preflight

Where things are (docs/architecture.md, "The engine"):
* `engine/requests.py`: what an operation is asked (one typed request per operation, composed of parts);
* `engine/graph.py`: the fleet graph every operation walks (stage and shard applied once, waves);
* `engine/context.py`: the `FleetContext` every operation receives (spec, targets, cloud port, plans,
  fingerprints, op builders, retries, the output cache, the scheduler);
* `engine/retries.py`: what a run leaves to do again, as an operation and its request (`Retry`), spelled by
  the renderer the caller gives (`render_retry`; the CLI's command line) wherever text is shown or stored;
* `engine/scheduler.py`: the one scheduler (the project → clusters DAG, forward for up, backward for
  destroy, concurrency, fail-fast), tested without an engine;
* `engine/liveness.py`: the live and drift checks that decide what is unchanged;
* `engine/operations/<name>.py`: one module per operation, `run(context, ...) -> FleetResult`.

Ordering and safety:
* everything that can be checked offline or read-only (recipe materialization and compatibility, tfvars,
  preflight) happens before the first mutation; a failure there touches nothing;
* a project stack (project, network, storage) is updated once, before any of its cluster stacks, so many
  clusters deploying in parallel never race to create the same network; a project's clusters start as
  soon as that project's stack is up;
* `continue-on-error` (default) keeps going past a failing target; `fail-fast` stops scheduling new work;
* destroy runs cluster stacks first, and a project stack only when none of its cluster stacks remain;
  projects and buckets are retained, an owned network is reclaimed;
* `--stage projects|clusters` splits those two phases across runs (CI: the projects stage once, the
  clusters stage sharded over a matrix); the clusters stage of `up` refuses to start while a project
  stack it needs is not deployed, and destroy's projects stage keeps a project whose clusters remain.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from npa_pulumi.engine import liveness
from npa_pulumi.engine.context import FleetContext, builtin_policy_pack
from npa_pulumi.engine.operations import adopt as adopt_operation
from npa_pulumi.engine.operations import preflight as preflight_operation
from npa_pulumi.engine.operations import preview as preview_operation
from npa_pulumi.engine.operations import refresh as refresh_operation
from npa_pulumi.engine.operations import status as status_operation
from npa_pulumi.engine.operations import teardown as teardown_operation
from npa_pulumi.engine.operations import up as up_operation
from npa_pulumi.engine.operations import verify as verify_operation
from npa_pulumi.engine.requests import (
    AdoptRequest,
    CleanupRequest,
    FleetRequest,
    HealthRequest,
    PreviewRequest,
    RefreshRequest,
    StatusRequest,
    UpRequest,
    VerifyRequest,
    breaks_locks,
)
from npa_pulumi.engine.share import Stage
from npa_pulumi.output.results import FleetResult

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from npa_pulumi.engine.retries import RenderRetry
    from npa_pulumi.engine.teardown.resume import Receipt
    from npa_pulumi.engine.teardown.run import Teardown
    from npa_pulumi.output.health import FleetHealth
    from npa_pulumi.output.progress import Progress
    from npa_pulumi.plan import Target
    from npa_pulumi.preflight.report import PreflightReport
    from npa_pulumi.spec import FleetSpec

__all__ = ["Fleet", "builtin_policy_pack"]

R = TypeVar("R")


def _hosted(method: Callable[..., R]) -> Callable[..., R]:
    """A command whose engine runs share one dynamic-provider host (engine/automation/provider_host.py): the
    host is stopped when the command ends, however it ends."""

    @functools.wraps(method)
    def run(self: Fleet, *args: Any, **kwargs: Any) -> R:
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

            context = self.context
            stage = context.share.stage
            targets = context.targets
            stacks = {t.cluster_stack for t in targets} if stage is not Stage.PROJECTS else set()
            if not context.share.shard and stage is not Stage.CLUSTERS:
                # Shards of one fleet share project stacks: those are single-flight through the engine's
                # stack lock instead (operations/up.py), so shards on one machine can run side by side.
                # The clusters stage only reads them.
                stacks |= {t.project_stack for t in targets}
            with exclusive_run(
                context.settings.backend_url,
                context.spec.name,
                command,
                stacks,
                breaks_locks(context.request),
            ) as notes:
                for note in notes:
                    context.progress.message(f"{context.spec.name}: {note}")
                return method(self, *args, **kwargs)

        return run

    return wrap


class Fleet:
    """The operations of one command over one selection: each takes the command's request (the one the
    fleet was opened with) and runs over the context it composes."""

    def __init__(
        self,
        spec: FleetSpec,
        targets: Sequence[Target],
        request: FleetRequest,
        spec_path: str | None = None,
        progress: Progress | None = None,
        render_retry: RenderRetry | None = None,
    ) -> None:
        self.context = FleetContext(spec, targets, request, spec_path, progress, render_retry)
        self._planned_teardown: Teardown | None = None
        self._planned_adoption: adopt_operation.AdoptionPlan | None = None

    @property
    def request(self) -> FleetRequest:
        return self.context.request

    @property
    def progress(self) -> Progress:
        return self.context.progress

    def close(self) -> None:
        self.context.close()

    def _asked(self, kind: type[R]) -> R:
        request = self.context.request
        if not isinstance(request, kind):
            raise TypeError(f"this fleet was opened with a {type(request).__name__}, not a {kind.__name__}")
        return request

    # ------------------------------------------------------------------------------- changes

    @_hosted
    def preview(self) -> FleetResult:
        return preview_operation.run(self.context, self._asked(PreviewRequest))

    @_hosted
    @_exclusive("up")
    def up(self) -> FleetResult:
        return up_operation.run(self.context, self._asked(UpRequest))

    def teardown_plan(self) -> FleetResult:
        """`destroy --dry-run`, and the phases `destroy` then runs (changes nothing)."""
        teardown = self._asked(CleanupRequest).teardown
        result, self._planned_teardown = teardown_operation.plan(self.context, teardown)
        return result

    @_hosted
    @_exclusive("destroy")
    def destroy(self, resumed: Receipt | None = None) -> FleetResult:
        teardown = self._asked(CleanupRequest).teardown
        return teardown_operation.destroy(self.context, teardown, resumed, planned=self._planned_teardown)

    def adoption_plan(self, source: Path) -> FleetResult:
        """`adopt --dry-run`, and what `adopt` then takes over (reads only: nothing changes)."""
        self._asked(AdoptRequest)
        result, self._planned_adoption = adopt_operation.plan(self.context, source)
        return result

    @_hosted
    @_exclusive("adopt")
    def adopt(self, source: Path) -> FleetResult:
        """Take over the original tool's clusters: exactly those `adoption_plan` found (planned now if it
        did not run)."""
        adoption = self._planned_adoption
        if adoption is None or adoption.source != source:
            _, adoption = adopt_operation.plan(self.context, source)
        return adopt_operation.run(self.context, adoption)

    def cleanup_plan(self) -> FleetResult:
        """`cleanup --dry-run`: what the fleet created that no stack references any more (read-only)."""
        teardown = self._asked(CleanupRequest).teardown
        return teardown_operation.cleanup(self.context, teardown, dry_run=True)

    @_hosted
    @_exclusive("cleanup")
    def cleanup(self) -> FleetResult:
        teardown = self._asked(CleanupRequest).teardown
        return teardown_operation.cleanup(self.context, teardown, dry_run=False)

    @_hosted
    @_exclusive("refresh")
    def refresh(self) -> FleetResult:
        self._asked(RefreshRequest)
        return refresh_operation.run(self.context)

    # --------------------------------------------------------------------------------- reads

    def status(self) -> FleetResult:
        return status_operation.run(self.context, self._asked(StatusRequest))

    def kubeconfigs(self) -> list[dict[str, str]]:
        return status_operation.kubeconfigs(self.context)

    def health(self) -> FleetHealth:
        """Nodes, Nebius' conditions and maintenance now; `requalify` probes the unqualified nodes."""
        from npa_pulumi.engine.operations import health as health_operation

        return health_operation.run(self.context, self._asked(HealthRequest))

    def verify(self, verifier: verify_operation.Verifier) -> FleetResult:
        """One verifier over the selected, deployed clusters (read-only; `verify-mig --reconcile` repairs)."""
        return verify_operation.run(self.context, self._asked(VerifyRequest), verifier)

    def preflight(self) -> PreflightReport:
        """Whether the tenant's quota and reserved capacity fit the selection (read-only)."""
        return preflight_operation.run(self.context)

    def plans_checked(self) -> None:
        """Every offline check (recipes, tfvars) of the plans, before anyone is asked to approve."""
        self.context.plans()

    def unchanged_clusters(self) -> set[str]:
        """The selected cluster stacks `up` would skip (deployed from this plan, live): no new demand."""
        return liveness.unchanged_clusters(self.context)
