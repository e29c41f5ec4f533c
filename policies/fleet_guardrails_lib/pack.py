"""Turning the catalog (npa_pulumi.policies.catalog) and the checks into pulumi-policy objects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from npa_pulumi.policies import catalog

from .checks import RESOURCE_CHECKS, Check, CheckContext, check_fleet_tags_present
from .facts import ClusterRegistry, Subject, cluster_facts
from .secret_marking import secrets_visible as marking_active

_LEVELS = {
    "advisory": EnforcementLevel.ADVISORY,
    "mandatory": EnforcementLevel.MANDATORY,
    "remediate": EnforcementLevel.REMEDIATE,
    "disabled": EnforcementLevel.DISABLED,
}


def violation_message(info: catalog.PolicyInfo, problems: list[str]) -> str:
    """One violation per resource: every problem, then the catalog's remediation hint."""
    return f"{'; '.join(problems)}. Remediation: {info.remediation}."


def effective_config(info: catalog.PolicyInfo, given: Mapping[str, Any] | None) -> dict[str, Any]:
    # The engine already fills schema defaults; merging them here too keeps hand-built args (tests) honest.
    return {**info.config_defaults(), **dict(given or {})}


def _config_schema(info: catalog.PolicyInfo) -> PolicyConfigSchema | None:
    if not info.config_schema:
        return None
    return PolicyConfigSchema(properties={k: dict(v) for k, v in info.config_schema.items()})


def _resource_policy(info: catalog.PolicyInfo, check: Check, ctx: CheckContext) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        subject = Subject.from_args(args)
        if subject.resource_type == catalog.K8S_TRAINING_CLUSTER:
            # Every policy records (idempotently), so a child is judged even if only one policy is enabled.
            ctx.registry.record(cluster_facts(subject.urn, subject.props))
        problems = check(subject, effective_config(info, args.get_config()), ctx)
        if problems:
            report_violation(violation_message(info, problems), None)

    return ResourceValidationPolicy(
        name=info.name,
        description=info.description,
        validate=validate,
        enforcement_level=_LEVELS[info.level],
        config_schema=_config_schema(info),
        remediation_steps=info.remediation,
    )


def _stack_policy(info: catalog.PolicyInfo) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        tags = dict(getattr(args, "stack_tags", None) or {})
        types = [r.resource_type for r in args.resources]
        problems = check_fleet_tags_present(tags, types, effective_config(info, args.get_config()))
        if problems:
            report_violation(violation_message(info, problems), None)

    return StackValidationPolicy(
        name=info.name,
        description=info.description,
        validate=validate,
        enforcement_level=_LEVELS[info.level],
        config_schema=_config_schema(info),
        remediation_steps=info.remediation,
    )


def build_policies(
    registry: ClusterRegistry | None = None, secrets_visible: bool | None = None
) -> list[Policy]:
    """All policies of the pack, in catalog order.

    `secrets_visible`: whether a plain property value means plaintext (secret marking installed); defaults
    to whether `install_secret_marking()` succeeded in this process.
    """
    ctx = CheckContext(
        registry=registry or ClusterRegistry(),
        secrets_visible=marking_active() if secrets_visible is None else secrets_visible,
    )
    policies: list[Policy] = []
    for info in catalog.POLICIES:
        if info.kind == "stack":
            policies.append(_stack_policy(info))
        else:
            policies.append(_resource_policy(info, RESOURCE_CHECKS[info.name], ctx))
    return policies


def build_policy_pack_kwargs(readme: str | None = None) -> dict[str, Any]:
    """Keyword arguments for `PolicyPack(...)` (the pack's __main__ passes them straight through)."""
    kwargs: dict[str, Any] = {
        "name": catalog.PACK_NAME,
        "description": (
            "npa-pulumi fleet guardrails: reservations, nofail mounts, MIG pins, NVSwitch, fabric, "
            "credentials, retention and stack tags."
        ),
        "display_name": "npa-pulumi fleet guardrails",
        "policies": build_policies(),
    }
    if readme:
        kwargs["readme"] = readme
    return kwargs
