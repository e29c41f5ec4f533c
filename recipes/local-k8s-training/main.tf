# The mk8s cluster and its node groups, created and deleted in the local cloud by local-exec provisioners.
#
# Terraform cannot read a provisioner's stdout, so every ID is derived, here and in the simulator alike,
# from an idempotency key: the terraform_data's own `self.id`, sent as `idempotency_key`. The simulator
# gives the object the ID "<prefix>-e00" + the first 15 hex digits of sha256("<prefix>/<key>"), which is
# what the locals below compute. That is why the local cloud accepts client-supplied idempotency keys.
#
# A create provisioner that fails (the simulator refused, or a node group stayed PROVISIONING because its
# quota or capacity block is short) exits non-zero, which fails the apply. The simulator then removes the
# half-created object itself, because Terraform never runs the destroy provisioner of a tainted resource.

locals {
  cluster_id = "mk8scluster-e00${substr(sha256("mk8scluster/${terraform_data.cluster.id}"), 0, 15)}"
  # The same strings the simulator reports (npa_pulumi/cloud/local/records.py endpoint_for).
  public_endpoint  = "https://pub.${local.cluster_id}.mk8s.${var.region}.local-cloud.invalid:443"
  private_endpoint = "https://${local.cluster_id}.mk8s.${var.region}.local-cloud.invalid:443"

  cluster_request = {
    tenant_id         = var.tenant_id
    region            = var.region
    project_id        = var.parent_id
    name              = var.cluster_name
    subnet_id         = var.subnet_id
    k8s_version       = var.k8s_version == null ? "" : var.k8s_version
    public_endpoint   = var.mk8s_cluster_public_endpoint
    etcd_cluster_size = var.etcd_cluster_size
    labels            = local.labels
  }

  cpu_node_group_request = {
    cluster_id         = local.cluster_id
    name               = "${var.cluster_name}-ng-cpu"
    node_count         = local.cpu_node_count
    platform           = local.cpu_platform
    preset             = local.cpu_preset
    disk_type          = var.cpu_disk_type
    disk_size_gib      = floor(tonumber(var.cpu_disk_size))
    preemptible        = var.cpu_nodes_preemptible
    public_ips         = var.cpu_nodes_public_ips
    reservation_policy = null
    reservation_ids    = []
    gpu_cluster_id     = null
    filesystems        = [for a in local.node_group_attachments : a if a.node_group == "cpu"]
    mount              = var.enable_filestore ? local.filesystem_mount : null
    labels             = local.labels
  }

  gpu_node_group_request = {
    cluster_id         = local.cluster_id
    node_count         = local.gpu_node_count
    platform           = local.gpu_platform
    preset             = local.gpu_preset
    disk_type          = var.gpu_disk_type
    disk_size_gib      = floor(tonumber(var.gpu_disk_size))
    preemptible        = var.gpu_nodes_preemptible
    public_ips         = var.gpu_nodes_public_ips
    reservation_policy = local.reservation_policy
    reservation_ids    = local.reservation_ids
    gpu_cluster_id     = local.gpu_cluster_id
    filesystems        = [for a in local.node_group_attachments : a if a.node_group == "gpu"]
    mount              = var.enable_filestore ? local.filesystem_mount : null
    labels             = local.labels
  }

  cpu_node_group_id  = "mk8snodegroup-e00${substr(sha256("mk8snodegroup/${terraform_data.cpu_node_group.id}"), 0, 15)}"
  gpu_node_group_ids = [for g in terraform_data.gpu_node_group : "mk8snodegroup-e00${substr(sha256("mk8snodegroup/${g.id}"), 0, 15)}"]
}

resource "terraform_data" "cluster" {
  triggers_replace = local.cluster_request

  provisioner "local-exec" {
    command = "${local.npa_api} create_cluster --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode(merge(local.cluster_request, { idempotency_key = self.id, wait = true }))
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.cloud.local.api delete_cluster --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({
        cluster_id = "mk8scluster-e00${substr(sha256("mk8scluster/${self.id}"), 0, 15)}"
        missing_ok = true
      })
    }
  }
}

resource "terraform_data" "cpu_node_group" {
  triggers_replace = local.cpu_node_group_request

  provisioner "local-exec" {
    command = "${local.npa_api} create_node_group --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode(merge(local.cpu_node_group_request, { idempotency_key = self.id, wait = true }))
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.cloud.local.api delete_node_group --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({
        node_group_id = "mk8snodegroup-e00${substr(sha256("mk8snodegroup/${self.id}"), 0, 15)}"
        missing_ok    = true
      })
    }
  }
}

resource "terraform_data" "gpu_node_group" {
  count            = var.gpu_node_groups
  triggers_replace = merge(local.gpu_node_group_request, { name = "${var.cluster_name}-ng-gpu-${count.index}" })

  provisioner "local-exec" {
    command = "${local.npa_api} create_node_group --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode(merge(local.gpu_node_group_request, {
        name            = "${var.cluster_name}-ng-gpu-${count.index}"
        idempotency_key = self.id
        wait            = true
      }))
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.cloud.local.api delete_node_group --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({
        node_group_id = "mk8snodegroup-e00${substr(sha256("mk8snodegroup/${self.id}"), 0, 15)}"
        missing_ok    = true
      })
    }
  }
}
