"""What keyless CI needs on the Nebius side (`backend init --ci-repository OWNER/REPO`): two service accounts,
the federated credentials that let GitHub Actions jobs act as them, and the least-privilege group
memberships, written as Terraform for the Nebius provider (its documented `nebius_iam_v1_*` resources) to
review and apply. Nothing is created here: IAM changes are the tenant admin's to make.

* `preview`: pull-request jobs (GitHub's `sub` claim `repo:OWNER/REPO:pull_request`). Previews, preflight
  and status only read, so the account joins the tenant's `viewers` group.
* `deploy`: jobs of the approval-gated environment (`repo:OWNER/REPO:environment:NAME`). `up` and
  `destroy` create and delete what the fleet owns: the tenant's `editors` group. Nebius lets only `admins`
  manage group memberships, which the recipe's node-group service account and a project's `object_storage`
  identity need; the output says so rather than granting it.

The jobs set `NPA_NEBIUS_AUTH=federated` and `NPA_NEBIUS_SERVICE_ACCOUNT_ID` (a variable, not a secret: an
account id grants nothing without a token from the trusted issuer and subject).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from npa_pulumi.errors import UserInputError

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
DEFAULT_ENVIRONMENT = "fleet-production"
_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")
_ENVIRONMENT = re.compile(r"^[A-Za-z0-9 ._-]{1,255}$")


@dataclass(frozen=True)
class CiAccount:
    role: str  # preview | deploy
    name: str  # the service account's name
    subject: str  # the OIDC `sub` claim the federated credentials trust
    group: str  # the tenant's default group it joins
    variable: str  # the repository/environment variable that holds its id
    why: str


@dataclass(frozen=True)
class CiIdentity:
    repository: str
    environment: str
    issuer: str
    accounts: tuple[CiAccount, ...]
    note: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def terraform(self) -> str:
        """The Terraform (Nebius provider) that creates it, with the project and tenant as variables."""
        blocks = [
            'variable "project_id" {\n  description = "The project the CI service accounts live in"\n}\n',
            'variable "tenant_id" {\n  description = "The fleet\'s tenant"\n}\n',
        ]
        for account in self.accounts:
            key = f"npa_ci_{account.role}"
            blocks.append(
                f'resource "nebius_iam_v1_service_account" "{key}" {{\n'
                f"  parent_id = var.project_id\n"
                f'  name      = "{account.name}"\n'
                f"}}\n"
            )
            blocks.append(
                f"# {account.why}\n"
                f'resource "nebius_iam_v1_federated_credentials" "{key}" {{\n'
                f"  parent_id            = var.project_id\n"
                f'  name                 = "{account.name}-github"\n'
                f"  subject_id           = nebius_iam_v1_service_account.{key}.id\n"
                f'  federated_subject_id = "{account.subject}"\n'
                f'  oidc_provider = {{\n    issuer_url = "{self.issuer}"\n  }}\n'
                f"}}\n"
            )
            blocks.append(
                f'data "nebius_iam_v1_group" "{account.group}" {{\n'
                f'  name      = "{account.group}"\n'
                f"  parent_id = var.tenant_id\n"
                f"}}\n"
            )
            blocks.append(
                f'resource "nebius_iam_v1_group_membership" "{key}" {{\n'
                f"  parent_id = data.nebius_iam_v1_group.{account.group}.id\n"
                f"  member_id = nebius_iam_v1_service_account.{key}.id\n"
                f"}}\n"
            )
            blocks.append(
                f'output "{account.variable.lower()}" {{\n'
                f"  value = nebius_iam_v1_service_account.{key}.id\n"
                f"}}\n"
            )
        return "\n".join(blocks)


def ci_identity(repository: str, environment: str = DEFAULT_ENVIRONMENT) -> CiIdentity:
    """The accounts, federated credentials and memberships for GitHub repository OWNER/REPO."""
    if not _REPOSITORY.match(repository or ""):
        raise UserInputError(f"--ci-repository {repository!r}: expected OWNER/REPO as GitHub spells it")
    if not _ENVIRONMENT.match(environment or ""):
        raise UserInputError(f"--ci-environment {environment!r}: expected a GitHub environment name")
    slug = re.sub(r"[^a-z0-9-]+", "-", repository.split("/", 1)[1].lower()).strip("-")[:40] or "fleet"
    accounts = (
        CiAccount(
            role="preview",
            name=f"npa-ci-preview-{slug}",
            subject=f"repo:{repository}:pull_request",
            group="viewers",
            variable="NEBIUS_PREVIEW_SERVICE_ACCOUNT_ID",
            why="pull-request jobs: previews, preflight and status only read",
        ),
        CiAccount(
            role="deploy",
            name=f"npa-ci-deploy-{slug}",
            subject=f"repo:{repository}:environment:{environment}",
            group="editors",
            variable="NEBIUS_DEPLOY_SERVICE_ACCOUNT_ID",
            why=f"jobs of the approval-gated `{environment}` environment: up and destroy",
        ),
    )
    note = (
        "Only admins may manage group memberships in Nebius: if the recipe adds its node-group service "
        "account to a group (upstream k8s-training does) or a project uses object_storage, the deploy "
        "account must be in `admins` instead of `editors`. Forks' pull requests get no OIDC token."
    )
    return CiIdentity(repository, environment, GITHUB_ISSUER, accounts, note)
