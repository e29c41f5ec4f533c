"""`--waves`, `--max-in-flight`, `--max-in-flight-per-reservation`, `--ignore-maintenance`: a staged rollout
from the command line, in place of (or beside) the spec's `rollout:` block (plan/rollout.py has the rules)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def ignore_maintenance_option(command: F) -> F:
    """`up` and `preview` (not the offline `plan`): what a rollout does with a cluster under maintenance."""
    return click.option(
        "--ignore-maintenance",
        is_flag=True,
        help="Rollout: start clusters with an active maintenance event or a node in NebiusGPUError too "
        "(a staged up holds them otherwise; the reason is kept as a warning).",
    )(command)


def rollout_options(command: F) -> F:
    command = click.option(
        "--max-in-flight-per-reservation",
        type=click.IntRange(min=1),
        default=None,
        help="Rollout: clusters of one capacity block group applying at once (over the spec's value).",
    )(command)
    command = click.option(
        "--max-in-flight",
        type=click.IntRange(min=1),
        default=None,
        help="Rollout: clusters applying at once, overall (over the spec's value and --concurrency).",
    )(command)
    return click.option(
        "--waves",
        default=None,
        metavar="WAVES",
        help="A staged rollout, over the spec's rollout.waves: waves separated by ';', each 'rest', a count "
        "(3), a percentage (25%%) or project/cluster selectors (globs; ',' between), e.g. "
        "'research/train;3;rest'. A wave starts once every cluster of the previous one passed its gate.",
    )(command)


def rollout_policy(spec: Any, kw: dict[str, Any]) -> Any:
    """The spec's rollout policy with the flags' values in place of its own (None: no rollout); the flags
    are checked as they are read (`fleet_options.rollout`), before anything is read or changed."""
    from npa_pulumi.cli.fleet_options import rollout
    from npa_pulumi.plan.rollout import RolloutPolicy, with_overrides

    flags = rollout(kw)
    base = RolloutPolicy.from_spec(spec.rollout) if spec.rollout is not None else None
    return with_overrides(base, flags.waves, flags.max_in_flight, flags.max_in_flight_per_reservation)
