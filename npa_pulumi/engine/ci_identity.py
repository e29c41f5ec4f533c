"""What keyless CI needs on the Nebius side (`backend init --ci-repository OWNER/REPO`): two service accounts,
the federated credentials that let GitHub Actions jobs act as them, and the least-privilege group
memberships and access permits, written as Terraform for the Nebius provider (its documented
`nebius_iam_v1_*` resources) to review and apply. Nothing is created here: IAM changes are the tenant
admin's to make.

* `preview`: pull-request jobs (GitHub's `sub` claim `repo:OWNER/REPO:pull_request`). Previews, preflight
  and status only read, so the account joins the tenant's `viewers` group.
* `deploy`: jobs of the approval-gated environment (`repo:OWNER/REPO:environment:NAME`). `up` and
  `destroy` create and delete what the fleet owns: the tenant's `editors` group. Nebius lets only `admins`
  manage group memberships, which the recipe's node-group service account and a project's `object_storage`
  identity need; the output says so rather than granting it.
* Both: the state bucket without a stored key. Each run mints a short-lived access key for its own account
  and deletes it at the end (engine/automation/state_key.py), so each account gets a custom group of its
  own holding two access permits: `storage.object-editor` on the state bucket (the engine reads and writes
  checkpoints and takes stack locks), and `admin` on the account's own project. Nebius documents creating
  access keys as an `admin`'s act and names no narrower role; an access key's parent is the project, not
  the account, so the narrowest scope that covers it is a project that holds this one account and nothing
  else. Within that project the account can create keys only for itself, because it is the only account
  there.

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
# docs.nebius.com/iam/service-accounts/access-keys: creating an access key needs the `admin` role; there is
# no narrower documented role, so it is granted on a project that holds the CI account alone.
KEY_MINTING_ROLE = "admin"
STATE_BUCKET_ROLE = "storage.object-editor"  # read and write checkpoints, take stack locks
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
    project_variable: str  # the Terraform variable naming the project that holds this account alone
    keys_group: str  # its custom group: creating its own access keys, and the state bucket

    @property
    def key(self) -> str:
        return f"npa_ci_{self.role}"


@dataclass(frozen=True)
class CiIdentity:
    repository: str
    environment: str
    issuer: str
    accounts: tuple[CiAccount, ...]
    note: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def variables(self) -> list[tuple[str, str]]:
        """The Terraform variables the admin sets: (name, what it is)."""
        found = [("tenant_id", "The fleet's tenant")]
        found += [
            (
                a.project_variable,
                f"A project that holds the {a.role} account and no other account: the access keys it mints "
                "for itself are children of this project",
            )
            for a in self.accounts
        ]
        found.append(("state_bucket_id", "The state bucket's id (nebius storage bucket get-by-name)"))
        return found

    def terraform(self) -> str:
        """The Terraform (Nebius provider) that creates it, with the projects, the tenant and the state
        bucket as variables."""
        blocks = [f'variable "{name}" {{\n  description = "{what}"\n}}\n' for name, what in self.variables()]
        for account in self.accounts:
            key, project = account.key, f"var.{account.project_variable}"
            blocks.append(
                f'resource "nebius_iam_v1_service_account" "{key}" {{\n'
                f"  parent_id = {project}\n"
                f'  name      = "{account.name}"\n'
                f"}}\n"
            )
            blocks.append(
                f"# {account.why}\n"
                f'resource "nebius_iam_v1_federated_credentials" "{key}" {{\n'
                f"  parent_id            = {project}\n"
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
            blocks += _key_minting(account, project)
            blocks.append(
                f'output "{account.variable.lower()}" {{\n'
                f"  value = nebius_iam_v1_service_account.{key}.id\n"
                f"}}\n"
            )
        return "\n".join(blocks)


def _key_minting(account: CiAccount, project: str) -> list[str]:
    """The account's own custom group: it may create access keys for itself (admin on the project that
    holds only it) and use the state bucket (storage.object-editor on the bucket)."""
    key = account.key
    group = f"nebius_iam_v1_group.{key}_keys.id"
    return [
        f"# Each {account.role} run mints a short-lived key to the state bucket for this account and\n"
        "# deletes it at the end: no key is stored in CI. Access keys are children of the project, and\n"
        "# Nebius documents creating them as an admin's act: `admin` on a project of this account alone.\n"
        f'resource "nebius_iam_v1_group" "{key}_keys" {{\n'
        f"  parent_id = var.tenant_id\n"
        f'  name      = "{account.keys_group}"\n'
        f"}}\n",
        f'resource "nebius_iam_v1_group_membership" "{key}_keys" {{\n'
        f"  parent_id = {group}\n"
        f"  member_id = nebius_iam_v1_service_account.{key}.id\n"
        f"}}\n",
        f'resource "nebius_iam_v1_access_permit" "{key}_own_keys" {{\n'
        f"  parent_id   = {group}\n"
        f"  resource_id = {project}\n"
        f'  role        = "{KEY_MINTING_ROLE}"\n'
        f"}}\n",
        f'resource "nebius_iam_v1_access_permit" "{key}_state" {{\n'
        f"  parent_id   = {group}\n"
        f"  resource_id = var.state_bucket_id\n"
        f'  role        = "{STATE_BUCKET_ROLE}"\n'
        f"}}\n",
    ]


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
            project_variable="preview_project_id",
            keys_group=f"npa-ci-preview-{slug}-keys",
        ),
        CiAccount(
            role="deploy",
            name=f"npa-ci-deploy-{slug}",
            subject=f"repo:{repository}:environment:{environment}",
            group="editors",
            variable="NEBIUS_DEPLOY_SERVICE_ACCOUNT_ID",
            why=f"jobs of the approval-gated `{environment}` environment: up and destroy",
            project_variable="deploy_project_id",
            keys_group=f"npa-ci-deploy-{slug}-keys",
        ),
    )
    note = (
        "Only admins may manage group memberships in Nebius: if the recipe adds its node-group service "
        "account to a group (upstream k8s-training does) or a project uses object_storage, the deploy "
        "account must be in `admins` instead of `editors`. Forks' pull requests get no OIDC token. Each "
        "account's `admin` permit is on its own project only, which must hold no other account: there it "
        "can create access keys (and authorized keys, federated credentials) for itself alone; that a "
        "project-scoped admin may create access keys is what a real tenant confirms (docs/ci-previews.md)."
    )
    return CiIdentity(repository, environment, GITHUB_ISSUER, accounts, note)
