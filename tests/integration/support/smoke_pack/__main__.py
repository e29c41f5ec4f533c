"""One mandatory resource policy: an Echo resource must not say 'forbidden'."""

from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)


def no_forbidden_message(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type == "pulumi-python:dynamic/smoke:Echo" and args.props.get("message") == "forbidden":
        report_violation("the Echo message must not be 'forbidden'", None)


PolicyPack(
    name="smoke-pack",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        ResourceValidationPolicy(
            name="no-forbidden-message",
            description="Echo resources must not carry the forbidden message.",
            validate=no_forbidden_message,
        )
    ],
)
