# The local stand-in for nebius-solutions-library/soperator/installations/example: the variables the fleet
# renders, but it talks to npa-pulumi's embedded local cloud instead of Nebius. Built-in Terraform features only
# (terraform_data, local-exec provisioners, built-in functions): no providers, no registry, no network.
terraform {
  required_version = ">= 1.5.0"
}
