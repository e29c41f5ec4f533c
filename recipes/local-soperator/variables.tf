# The variable surface of soperator/installations/example (nebius-solutions-library, recipe 1.20.1) that
# the fleet renders, plus npa_idempotency_scope (the stand-in's own, see main.tf). Identity arrives as
# TF_VAR_* at run time: region, iam_tenant_id, iam_project_id, vpc_subnet_id, the o11y ids and iam_token.

variable "region" { type = string }
variable "iam_token" {
  type      = string
  default   = ""
  sensitive = true
}
variable "iam_tenant_id" { type = string }
variable "iam_project_id" { type = string }
variable "vpc_subnet_id" {
  type = string
  validation {
    condition     = startswith(var.vpc_subnet_id, "vpcsubnet-")
    error_message = "vpc_subnet_id must start with vpcsubnet-."
  }
}
variable "o11y_iam_tenant_id" { type = string }
variable "o11y_iam_project_id" { type = string }
variable "o11y_iam_group_id" { type = string }
variable "o11y_profile" { type = string }

variable "backups_enabled" {
  type    = string
  default = "auto"
}
variable "backups_password" {
  type      = string
  sensitive = true
}
variable "backups_schedule" { type = string }
variable "backups_prune_schedule" { type = string }
variable "backups_retention" { type = any }

variable "company_name" {
  type = string
  validation {
    condition     = length(var.company_name) >= 1 && length(var.company_name) <= 32 && can(regex("^[a-z][a-z\\d\\-]*[a-z\\d]+$", var.company_name))
    error_message = "company_name must be 1-32 characters matching ^[a-z][a-z\\d\\-]*[a-z\\d]+$."
  }
}

variable "k8s_version" {
  type    = string
  default = "1.30"
}
variable "slurm_operator_version" { type = string }
variable "slurm_login_ssh_root_public_keys" { type = list(string) }
variable "accounting_enabled" {
  type    = bool
  default = false
}

# Exactly one of `existing {id}` or `spec {size_gibibytes, block_size_kibibytes}`.
variable "filestore_controller_spool" {
  type = object({
    existing = optional(object({ id = string }))
    spec     = optional(object({ size_gibibytes = number, block_size_kibibytes = number }))
  })
  validation {
    condition     = (var.filestore_controller_spool.existing == null) != (var.filestore_controller_spool.spec == null)
    error_message = "filestore_controller_spool: exactly one of existing or spec."
  }
}
variable "filestore_jail" {
  type = object({
    existing = optional(object({ id = string }))
    spec     = optional(object({ size_gibibytes = number, block_size_kibibytes = number }))
  })
  validation {
    condition     = (var.filestore_jail.existing == null) != (var.filestore_jail.spec == null)
    error_message = "filestore_jail: exactly one of existing or spec."
  }
}
variable "filestore_accounting" {
  type = object({
    existing = optional(object({ id = string }))
    spec     = optional(object({ size_gibibytes = number, block_size_kibibytes = number }))
  })
  default = null
}

variable "slurm_nodeset_system" {
  type = object({
    min_size  = number
    max_size  = number
    resource  = object({ platform = string, preset = string })
    boot_disk = object({ type = string, size_gibibytes = number, block_size_kibibytes = number })
  })
}
variable "slurm_nodeset_controller" {
  type = object({
    size      = number
    resource  = object({ platform = string, preset = string })
    boot_disk = object({ type = string, size_gibibytes = number, block_size_kibibytes = number })
  })
}
variable "slurm_nodeset_login" {
  type = object({
    size      = number
    resource  = object({ platform = string, preset = string })
    boot_disk = object({ type = string, size_gibibytes = number, block_size_kibibytes = number })
  })
}
variable "slurm_nodeset_accounting" {
  type = object({
    resource  = object({ platform = string, preset = string })
    boot_disk = object({ type = string, size_gibibytes = number, block_size_kibibytes = number })
  })
  default = null
}
variable "slurm_nodeset_workers" {
  type = list(object({
    name                    = string
    size                    = number
    nodes_per_nodegroup     = number
    max_unavailable_percent = optional(number)
    preemptible             = optional(bool, false)
    resource                = object({ platform = string, preset = string })
    boot_disk               = object({ type = string, size_gibibytes = number, block_size_kibibytes = number })
    gpu_cluster             = optional(object({ infiniband_fabric = string }))
  }))
  validation {
    condition     = length(var.slurm_nodeset_workers) >= 1
    error_message = "at least one worker node set."
  }
}

variable "npa_idempotency_scope" {
  description = "The stand-in's own: the owner its idempotency keys derive from (the cluster stack)."
  type        = string
  default     = "npa"
}
