"""The fleet's façade: one object per command over the selected targets, whose methods are the operations.

    fleet = Fleet(spec, targets, FleetOptions(cloud="local", concurrency=4))
    result = fleet.up()        # or preview / destroy / status / refresh

Where things are (docs/architecture.md, "The engine"):
* `engine/options.py`: what an operation is asked (FleetOptions, the stage vocabulary);
* `engine/context.py`: the `FleetContext` every operation receives (spec, targets, cloud port, plans,
  fingerprints, op builders, retry commands, the output cache, the scheduler);
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
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine import liveness
from npa_pulumi.engine.context import FleetContext, builtin_policy_pack
from npa_pulumi.engine.operations import adopt as adopt_operation
from npa_pulumi.engine.operations import preview as preview_operation
from npa_pulumi.engine.operations import refresh as refresh_operation
from npa_pulumi.engine.operations import status as status_operation
from npa_pulumi.engine.operations import teardown as teardown_operation
from npa_pulumi.engine.operations import up as up_operation
from npa_pulumi.engine.options import DEFAULT_CONCURRENCY, STAGES, FleetOptions, check_stage
from npa_pulumi.engine.plans import FleetPlans
from npa_pulumi.engine.teardown.model import TeardownOptions
from npa_pulumi.output.results import FleetResult

if TYPE_CHECKING:
    from pathlib import Path

    from npa_pulumi.engine.operations.health import HealthOptions
    from npa_pulumi.engine.teardown.resume import Receipt
    from npa_pulumi.engine.teardown.run import Teardown
    from npa_pulumi.output.health import FleetHealth

__all__ = [
    "DEFAULT_CONCURRENCY",
    "STAGES",
    "Fleet",
    "FleetOptions",
    "builtin_policy_pack",
    "check_stage",
]

Preflight = Callable[[FleetPlans], dict[str, Any] | None]


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
                # stack lock instead (operations/up.py), so shards on one machine can run side by side.
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


class Fleet(FleetContext):
    """The operations of one command over one selection; the state they share is the context's."""

    _planned_teardown: Teardown | None = None
    _planned_adoption: adopt_operation.AdoptionPlan | None = None

    @_hosted
    def preview(self, preflight: Preflight | None = None) -> FleetResult:
        return preview_operation.run(self, preflight)

    @_hosted
    @_exclusive("up")
    def up(self, preflight: Preflight | None = None) -> FleetResult:
        return up_operation.run(self, preflight)

    def teardown_plan(self, teardown: TeardownOptions | None = None) -> FleetResult:
        """`destroy --dry-run`, and the phases `destroy` then runs (changes nothing)."""
        result, self._planned_teardown = teardown_operation.plan(self, teardown or TeardownOptions())
        return result

    @_hosted
    @_exclusive("destroy")
    def destroy(self, teardown: TeardownOptions | None = None, resumed: Receipt | None = None) -> FleetResult:
        options = teardown or TeardownOptions()
        return teardown_operation.destroy(self, options, resumed, planned=self._planned_teardown)

    def adoption_plan(self, source: Path) -> FleetResult:
        """`adopt --dry-run`, and what `adopt` then takes over (reads only: nothing changes)."""
        result, self._planned_adoption = adopt_operation.plan(self, source)
        return result

    @_hosted
    @_exclusive("adopt")
    def adopt(self, source: Path) -> FleetResult:
        """Take over the original tool's clusters: exactly those `adoption_plan` found (planned now if it
        did not run)."""
        adoption = self._planned_adoption
        if adoption is None or adoption.source != source:
            _, adoption = adopt_operation.plan(self, source)
        return adopt_operation.run(self, adoption)

    def cleanup_plan(self, teardown: TeardownOptions) -> FleetResult:
        """`cleanup --dry-run`: what the fleet created that no stack references any more (read-only)."""
        return teardown_operation.cleanup(self, teardown, dry_run=True)

    @_hosted
    @_exclusive("cleanup")
    def cleanup(self, teardown: TeardownOptions) -> FleetResult:
        return teardown_operation.cleanup(self, teardown, dry_run=False)

    @_hosted
    @_exclusive("refresh")
    def refresh(self) -> FleetResult:
        return refresh_operation.run(self)

    def status(self) -> FleetResult:
        return status_operation.run(self)

    def kubeconfigs(self) -> list[dict[str, str]]:
        return status_operation.kubeconfigs(self)

    def health(self, options: HealthOptions | None = None) -> FleetHealth:
        """Nodes, Nebius' conditions and maintenance now; `requalify` probes the unqualified nodes."""
        from npa_pulumi.engine.operations import health as health_operation

        return health_operation.run(self, options or health_operation.HealthOptions())

    def unchanged_clusters(self) -> set[str]:
        """The selected cluster stacks `up` would skip (deployed from this plan, live): no new demand."""
        return liveness.unchanged_clusters(self)
