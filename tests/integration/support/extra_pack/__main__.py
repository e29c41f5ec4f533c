"""Flags every Terraform bridge resource, so a test can see a user pack's results per stack."""

from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)


def flag_module(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type == "pulumi-python:dynamic/npa:TerraformModule":
        report_violation("team rule: every cluster change needs a change ticket", None)


PolicyPack(
    name="team-extra",
    enforcement_level=EnforcementLevel.ADVISORY,
    policies=[
        ResourceValidationPolicy(
            name="change-ticket-required",
            description="Cluster changes need a change ticket.",
            validate=flag_module,
        )
    ],
)
