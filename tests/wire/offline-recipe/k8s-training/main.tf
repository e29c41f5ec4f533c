# A recipe for the wire tests' plans only (tests/wire/fleet.py). Those tests run `--cloud nebius` against a
# loopback fake of the Nebius API, where no Terraform registry is reachable, so the recipe they plan must
# need no provider at all. It is neither upstream k8s-training nor a copy of its variables: it declares the
# identity the bridge passes and the cluster's name, and plans one `terraform_data` per cluster. Every
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

resource "terraform_data" "cluster" {
  input = {
    name      = var.cluster_name
    parent_id = var.parent_id
    subnet_id = var.subnet_id
  }
}

output "kube_cluster" {
  value = {
    id        = null
    name      = var.cluster_name
    endpoints = null
  }
}
