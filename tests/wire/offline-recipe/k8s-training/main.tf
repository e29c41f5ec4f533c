# A recipe for the wire tests' plans only (tests/wire/fleet.py). Those tests run `--cloud nebius` against a
# loopback fake of the Nebius API, where no Terraform registry is reachable, so the recipe they plan must
# need no provider at all. It is neither upstream k8s-training nor a copy of its variables: it declares the
# identity the bridge passes, the cluster's name and the node-pool settings the wire specs set (a recipe
# that does not declare a setting the cluster needs is refused), and plans one `terraform_data` per cluster. Every
# journey that claims a deployment runs upstream itself (the default recipe).

variable "tenant_id" {
  type = string
}

variable "parent_id" {
  type = string
}

variable "region" {
  type = string
}

variable "subnet_id" {
  type = string
}

variable "iam_token" {
  type      = string
  default   = null
  sensitive = true
}

variable "cluster_name" {
  type = string
}

variable "ssh_public_key" {
  type    = any
  default = null
}

variable "cpu_nodes_fixed_count" {
  type    = any
  default = null
}

variable "cpu_nodes_platform" {
  type    = any
  default = null
}

variable "cpu_nodes_preset" {
  type    = any
  default = null
}

variable "cpu_disk_size" {
  type    = any
  default = null
}

variable "gpu_nodes_fixed_count_per_group" {
  type    = any
  default = null
}

variable "gpu_node_groups" {
  type    = any
  default = null
}

variable "gpu_nodes_platform" {
  type    = any
  default = null
}

variable "gpu_nodes_preset" {
  type    = any
  default = null
}

variable "gpu_disk_size" {
  type    = any
  default = null
}

variable "gpu_nodes_driverfull_image" {
  type    = any
  default = null
}

variable "gpu_nodes_reservation_policy" {
  type    = any
  default = null
}

variable "infiniband_fabric" {
  type    = any
  default = null
}

variable "enable_filestore" {
  type    = any
  default = null
}

variable "filestore_disk_size_gibibytes" {
  type    = any
  default = null
}

variable "existing_filestore" {
  type    = any
  default = null
}

resource "terraform_data" "cluster" {
  input = {
    name      = var.cluster_name
    parent_id = var.parent_id
    subnet_id = var.subnet_id
    cpu_nodes = [var.cpu_nodes_fixed_count, var.cpu_nodes_platform, var.cpu_nodes_preset, var.cpu_disk_size]
    # Whether a reservation is set, never its id (the bridge passes it as TF_VAR_*, which is private).
    reserved  = var.gpu_nodes_reservation_policy != null
    gpu_nodes = [var.gpu_node_groups, var.gpu_nodes_fixed_count_per_group, var.gpu_nodes_platform, var.gpu_nodes_preset, var.gpu_disk_size, var.gpu_nodes_driverfull_image, var.infiniband_fabric]
    filestore = [var.enable_filestore, var.existing_filestore, var.filestore_disk_size_gibibytes]
  }
}

output "kube_cluster" {
  value = {
    id        = null
    name      = var.cluster_name
    endpoints = null
  }
}
