# The mk8s cluster and its node groups, created and deleted in the local cloud by local-exec provisioners.
#
# Terraform cannot read a provisioner's stdout, so every ID is derived, here and in the simulator alike,
# from an idempotency key sent with the create: the simulator gives the object the ID "<prefix>-e00" + the
# first 15 hex digits of sha256("<prefix>/<key>"), which is what the locals below compute.
#
# The keys are stable: derived from the owner (var.npa_idempotency_scope), the project, the object's name
# and a digest of its whole request. The request is also the resource's `triggers_replace`, so the key
# changes exactly when Terraform must replace the object (a new generation), and stays the same when an
# apply is repeated after a crash. That matters: if the run is killed while a create provisioner waits,
# Terraform never records the terraform_data; the next apply creates it again and sends the same key, and
# the simulator answers with the object the first attempt made instead of creating a second one (or
# refusing the duplicate name). Like Nebius idempotency keys, a replay must repeat the request exactly.
# (A key reused after its object was deleted makes a new object with the same ID.)
#
# A create provisioner that fails (the simulator refused, or a node group stayed PROVISIONING because its
# quota or capacity block is short) exits non-zero, which fails the apply. The simulator then removes the
# half-created object itself, because Terraform never runs the destroy provisioner of a tainted resource.
# Destroy provisioners may only reference `self`: they read the key back from `triggers_replace` (state
# written before keys were stable has none, and falls back to the old key, `self.id`).

locals {
  idempotency_scope = "${var.npa_idempotency_scope}/${var.parent_id}"
  cluster_key       = "${local.idempotency_scope}/mk8scluster/${var.cluster_name}/${sha256(jsonencode(local.cluster_request))}"
  cluster_id        = "mk8scluster-e00${substr(sha256("mk8scluster/${local.cluster_key}"), 0, 15)}"
  # The same strings the simulator reports (npa_pulumi/simulator/records.py endpoint_for).
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

  gpu_node_group_requests = [
    for i in range(var.gpu_node_groups) : merge(local.gpu_node_group_request, { name = "${var.cluster_name}-ng-gpu-${i}" })
  ]
  cpu_node_group_key  = "${local.idempotency_scope}/mk8snodegroup/${local.cpu_node_group_request.name}/${sha256(jsonencode(local.cpu_node_group_request))}"
  gpu_node_group_keys = [for r in local.gpu_node_group_requests : "${local.idempotency_scope}/mk8snodegroup/${r.name}/${sha256(jsonencode(r))}"]
  cpu_node_group_id   = "mk8snodegroup-e00${substr(sha256("mk8snodegroup/${local.cpu_node_group_key}"), 0, 15)}"
  gpu_node_group_ids  = [for k in local.gpu_node_group_keys : "mk8snodegroup-e00${substr(sha256("mk8snodegroup/${k}"), 0, 15)}"]
}

resource "terraform_data" "cluster" {
  triggers_replace = merge(local.cluster_request, { idempotency_key = local.cluster_key })

  provisioner "local-exec" {
    command = "${local.npa_api} create_cluster --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode(merge(local.cluster_request, { idempotency_key = local.cluster_key, wait = true }))
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api delete_cluster --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({
        cluster_id = "mk8scluster-e00${substr(sha256("mk8scluster/${try(self.triggers_replace.idempotency_key, self.id)}"), 0, 15)}"
        missing_ok = true
      })
    }
  }
}

resource "terraform_data" "cpu_node_group" {
  triggers_replace = merge(local.cpu_node_group_request, { idempotency_key = local.cpu_node_group_key })
  # IDs are computed from keys, not read from these resources, so the order is explicit: what a node
  # group joins or attaches exists before it is created and is deleted only after it.
  depends_on = [terraform_data.cluster, terraform_data.filesystem, terraform_data.gpu_cluster]

  provisioner "local-exec" {
    command = "${local.npa_api} create_node_group --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode(merge(local.cpu_node_group_request, { idempotency_key = local.cpu_node_group_key, wait = true }))
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api delete_node_group --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({
        node_group_id = "mk8snodegroup-e00${substr(sha256("mk8snodegroup/${try(self.triggers_replace.idempotency_key, self.id)}"), 0, 15)}"
        missing_ok    = true
      })
    }
  }
}

resource "terraform_data" "gpu_node_group" {
  count            = var.gpu_node_groups
  triggers_replace = merge(local.gpu_node_group_requests[count.index], { idempotency_key = local.gpu_node_group_keys[count.index] })
  depends_on       = [terraform_data.cluster, terraform_data.filesystem, terraform_data.gpu_cluster]

  provisioner "local-exec" {
    command = "${local.npa_api} create_node_group --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode(merge(local.gpu_node_group_requests[count.index], {
        idempotency_key = local.gpu_node_group_keys[count.index]
        wait            = true
      }))
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api delete_node_group --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({
        node_group_id = "mk8snodegroup-e00${substr(sha256("mk8snodegroup/${try(self.triggers_replace.idempotency_key, self.id)}"), 0, 15)}"
        missing_ok    = true
      })
    }
  }
}
