"""`verify-mig`, `verify-graphics`, `verify-storage`, `verify-fabric`: the selected clusters checked through
their registered kubeconfigs; each builds its typed request and calls the SDK."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from npa_pulumi.cli.common import output_option, run_guarded
from npa_pulumi.cli.fleet_options import FleetFields, fleet_fields, fleet_options, selection
from npa_pulumi.cli.fleet_output import finish

F = TypeVar("F", bound=Callable[..., Any])


def verifier_options(default_timeout_minutes: float) -> Callable[[F], F]:
    """The options every verifier takes: the selection, the output, its timeout and evidence directory."""

    def decorate(func: F) -> F:
        func = click.option(
            "--evidence-dir",
            default=None,
            type=click.Path(file_okay=False),
            help="Keep each cluster's evidence here (0700 dir, 0600 files; refused inside a git work tree).",
        )(func)
        func = click.option(
            "--timeout-minutes",
            default=default_timeout_minutes,
            show_default=True,
            type=click.FloatRange(min=0.1),
        )(func)
        return fleet_options(output_option()(func))

    return decorate


def _verify_fields(kw: dict[str, Any]) -> tuple[FleetFields, float, Any]:
    from pathlib import Path

    evidence = Path(kw["evidence_dir"]) if kw["evidence_dir"] else None
    return fleet_fields(kw, selection(kw)), kw["timeout_minutes"] * 60, evidence


@click.command("verify-mig")
@fleet_options
@output_option()
@click.option("--wait/--no-wait", default=False, show_default=True, help="Poll until ready or the timeout.")
@click.option(
    "--reconcile/--no-reconcile",
    default=False,
    show_default=True,
    help="Make the repairs the findings call for, in order: stale OnDelete driver pods replaced one worker "
    "at a time, the stale nvidia.com/gpu=mig-not-ready:NoSchedule taint, GPU feature discovery then the "
    "device plugin restarted; refused (nothing changed) while a GPU workload runs; waits as --wait does; "
    "private receipt under the npa home; the full gate runs again after a repair.",
)
@click.option("--timeout-minutes", default=10.0, show_default=True, type=click.FloatRange(min=0.1))
@click.option(
    "--evidence-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Keep each cluster's evidence here (0700 dir, 0600 files; refused inside a git work tree).",
)
def verify_mig_command(**kw: Any) -> None:
    """Check MIG readiness of the selected MIG clusters through their registered kubeconfigs (read-only
    unless --reconcile): the exact mixed / all-balanced layout on every GPU node, twice in a row."""

    def body() -> int:
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import MigVerifyRequest

        fields, timeout_s, evidence = _verify_fields(kw)
        request = MigVerifyRequest(
            **fields, timeout_s=timeout_s, evidence_dir=evidence, wait=kw["wait"], reconcile=kw["reconcile"]
        )
        return finish(sdk.verify_mig(kw["spec_path"], request), kw["output"])

    run_guarded(body, kw["output"])


@click.command("verify-graphics")
@verifier_options(10.0)
@click.option(
    "--reconcile/--no-reconcile",
    default=False,
    show_default=True,
    help="First make the repairs the findings call for: stale OnDelete driver pods replaced one worker at a "
    "time, GPU feature discovery then the device plugin restarted; refused (nothing changed) while a GPU "
    "workload runs; private receipt under the npa home; then the full gate.",
)
def verify_graphics_command(**kw: Any) -> None:
    """Run CUDA and GLX/EGL/Vulkan readiness on every GPU worker of the selected RTX rendering clusters,
    through their registered kubeconfigs (probe pods are removed after); a partial result fails."""

    def body() -> int:
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import GraphicsVerifyRequest

        fields, timeout_s, evidence = _verify_fields(kw)
        request = GraphicsVerifyRequest(
            **fields, timeout_s=timeout_s, evidence_dir=evidence, reconcile=kw["reconcile"]
        )
        return finish(sdk.verify_graphics(kw["spec_path"], request), kw["output"])

    run_guarded(body, kw["output"])


@click.command("verify-storage")
@verifier_options(10.0)
def verify_storage_command(**kw: Any) -> None:
    """Check the shared filesystem of the selected clusters through their registered kubeconfigs: the
    virtiofs mount (read-write, nofail, capacity) on every worker and one RWX claim that every worker
    writes to and reads every other's payload from. Probe objects are removed after; clusters whose spec
    disables the filesystem are skipped."""

    _run_verifier(kw, "storage")


@click.command("verify-fabric")
@verifier_options(15.0)
def verify_fabric_command(**kw: Any) -> None:
    """Measure NCCL all-reduce bus bandwidth on every GPU node (NVLink/NVSwitch) and across the
    InfiniBand fabric of the selected clusters, against their thresholds; on a slow fabric, name the node
    or link. Refused while pods hold the GPUs; probe pods are removed after."""

    _run_verifier(kw, "fabric")


def _run_verifier(kw: dict[str, Any], kind: str) -> None:
    def body() -> int:
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import VerifyRequest

        fields, timeout_s, evidence = _verify_fields(kw)
        request = VerifyRequest(**fields, timeout_s=timeout_s, evidence_dir=evidence)
        run = {"storage": sdk.verify_storage, "fabric": sdk.verify_fabric}
        return finish(run[kind](kw["spec_path"], request), kw["output"])

    run_guarded(body, kw["output"])


def register(group: click.Group) -> None:
    group.add_command(verify_mig_command)
    group.add_command(verify_graphics_command)
    group.add_command(verify_storage_command)
    group.add_command(verify_fabric_command)
