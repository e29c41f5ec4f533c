# One mk8s cluster `soperator-<company_name>` with node groups for the system, controller, login and
# (with accounting) accounting roles and one per chunk of `nodes_per_nodegroup` of each worker node set; an
# InfiniBand GPU cluster per worker set that asks for one; the shared filesystems (controller spool, jail,
# accounting); then "Flux": the Slurm cluster recorded as the cluster's `soperator` addon, which the
# cluster's agent turns into the operator's objects (npa_pulumi/simulator/kube/slurm.py).
#
# IDs are derived from idempotency keys (README.md, "Why IDs are derived from idempotency keys"): the
# simulator names an object "<prefix>-e00" + the first 15 hex digits of sha256("<prefix>/<key>").

locals {
  npa_api           = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api"
  cluster_name      = "soperator-${var.company_name}"
  idempotency_scope = "${var.npa_idempotency_scope}/${var.iam_project_id}"
  labels            = { "library-solution" = "soperator" }
  role_label        = "slurm.nebius.ai/node-role"
  nodeset_label     = "slurm.nebius.ai/nodeset"

  cluster_request = {
    tenant_id         = var.iam_tenant_id
    region            = var.region
    project_id        = var.iam_project_id
    name              = local.cluster_name
    subnet_id         = var.vpc_subnet_id
    k8s_version       = var.k8s_version
    public_endpoint   = true
    etcd_cluster_size = 3
    labels            = local.labels
  }
  cluster_key     = "${local.idempotency_scope}/mk8scluster/${local.cluster_name}/${sha256(jsonencode(local.cluster_request))}"
  cluster_id      = "mk8scluster-e00${substr(sha256("mk8scluster/${local.cluster_key}"), 0, 15)}"
  public_endpoint = "https://pub.${local.cluster_id}.mk8s.${var.region}.local-cloud.invalid:443"

  # --- shared filesystems -------------------------------------------------------------------------
  filestores = merge(
    { controller-spool = var.filestore_controller_spool, jail = var.filestore_jail },
    var.accounting_enabled && var.filestore_accounting != null ? { accounting = var.filestore_accounting } : {},
  )
  filesystem_requests = {
    for name, fs in local.filestores : name => {
      project_id       = var.iam_project_id
      name             = "${local.cluster_name}-${name}"
      size_bytes       = floor(fs.spec.size_gibibytes * 1073741824)
      disk_type        = "NETWORK_SSD"
      block_size_bytes = floor(fs.spec.block_size_kibibytes * 1024)
      labels           = local.labels
    } if fs.spec != null
  }
  filesystem_keys = { for name, r in local.filesystem_requests : name => "${local.idempotency_scope}/computefilesystem/${r.name}/${sha256(jsonencode(r))}" }
  filesystem_ids = {
    for name, fs in local.filestores : name => (
      fs.spec != null ? "computefilesystem-e00${substr(sha256("computefilesystem/${local.filesystem_keys[name]}"), 0, 15)}" : fs.existing.id
    )
  }
  # Controllers mount the spool and the jail; login and workers the jail; accounting its own.
  attachments = {
    system     = []
    controller = [for n in ["controller-spool", "jail"] : { filesystem_id = local.filesystem_ids[n], attach_mode = "READ_WRITE", mount_tag = n }]
    login      = [{ filesystem_id = local.filesystem_ids["jail"], attach_mode = "READ_WRITE", mount_tag = "jail" }]
    accounting = contains(keys(local.filesystem_ids), "accounting") ? [{ filesystem_id = local.filesystem_ids["accounting"], attach_mode = "READ_WRITE", mount_tag = "accounting" }] : []
    worker     = [{ filesystem_id = local.filesystem_ids["jail"], attach_mode = "READ_WRITE", mount_tag = "jail" }]
  }

  # --- GPU clusters: one per worker set that asks for InfiniBand ----------------------------------
  gpu_cluster_requests = {
    for w in var.slurm_nodeset_workers : w.name => {
      project_id = var.iam_project_id
      name       = "${local.cluster_name}-${w.name}-${w.gpu_cluster.infiniband_fabric}"
      fabric     = w.gpu_cluster.infiniband_fabric
    } if w.gpu_cluster != null
  }
  gpu_cluster_keys = { for n, r in local.gpu_cluster_requests : n => "${local.idempotency_scope}/computegpucluster/${r.name}/${sha256(jsonencode(r))}" }
  gpu_cluster_ids  = { for n, k in local.gpu_cluster_keys : n => "computegpucluster-e00${substr(sha256("computegpucluster/${k}"), 0, 15)}" }

  # --- node groups ----------------------------------------------------------------------------------
  roles = merge(
    {
      system     = { count = var.slurm_nodeset_system.min_size, resource = var.slurm_nodeset_system.resource, boot_disk = var.slurm_nodeset_system.boot_disk }
      controller = { count = var.slurm_nodeset_controller.size, resource = var.slurm_nodeset_controller.resource, boot_disk = var.slurm_nodeset_controller.boot_disk }
      login      = { count = var.slurm_nodeset_login.size, resource = var.slurm_nodeset_login.resource, boot_disk = var.slurm_nodeset_login.boot_disk }
    },
    var.accounting_enabled && var.slurm_nodeset_accounting != null ? {
      accounting = { count = 1, resource = var.slurm_nodeset_accounting.resource, boot_disk = var.slurm_nodeset_accounting.boot_disk }
    } : {},
  )
  role_groups = {
    for role, r in local.roles : role => {
      cluster_id         = local.cluster_id
      name               = "${local.cluster_name}-${role}"
      node_count         = r.count
      platform           = r.resource.platform
      preset             = r.resource.preset
      disk_type          = r.boot_disk.type
      disk_size_gib      = floor(r.boot_disk.size_gibibytes)
      preemptible        = false
      reservation_policy = null
      reservation_ids    = []
      gpu_cluster_id     = null
      filesystems        = local.attachments[role]
      labels             = merge(local.labels, { (local.role_label) = role })
    }
  }
  # Each worker set in chunks of nodes_per_nodegroup: worker-<set>-<chunk>.
  worker_groups = merge([
    for w in var.slurm_nodeset_workers : {
      for i in range(ceil(w.size / w.nodes_per_nodegroup)) : "worker-${w.name}-${i}" => {
        cluster_id         = local.cluster_id
        name               = "${local.cluster_name}-worker-${w.name}-${i}"
        node_count         = min(w.nodes_per_nodegroup, w.size - i * w.nodes_per_nodegroup)
        platform           = w.resource.platform
        preset             = w.resource.preset
        disk_type          = w.boot_disk.type
        disk_size_gib      = floor(w.boot_disk.size_gibibytes)
        preemptible        = w.preemptible
        reservation_policy = null
        reservation_ids    = []
        gpu_cluster_id     = lookup(local.gpu_cluster_ids, w.name, null)
        filesystems        = local.attachments.worker
        labels             = merge(local.labels, { (local.role_label) = "worker", (local.nodeset_label) = w.name })
      }
    }
  ]...)
  node_groups     = merge(local.role_groups, local.worker_groups)
  node_group_keys = { for k, r in local.node_groups : k => "${local.idempotency_scope}/mk8snodegroup/${r.name}/${sha256(jsonencode(r))}" }
  node_group_ids  = { for k, key in local.node_group_keys : k => "mk8snodegroup-e00${substr(sha256("mk8snodegroup/${key}"), 0, 15)}" }

  # --- the Slurm cluster Flux installs (the agent plays the operator) -------------------------------
  slurm = {
    name             = "soperator"
    namespace        = "soperator"
    operator_version = var.slurm_operator_version
    accounting       = var.accounting_enabled
    controllers      = var.slurm_nodeset_controller.size
    login            = var.slurm_nodeset_login.size
    nodesets = [for w in var.slurm_nodeset_workers : {
      name     = w.name
      size     = w.size
      platform = w.resource.platform
      preset   = w.resource.preset
      gpu      = startswith(w.resource.platform, "gpu-")
    }]
  }
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
        cluster_id = "mk8scluster-e00${substr(sha256("mk8scluster/${self.triggers_replace.idempotency_key}"), 0, 15)}"
        missing_ok = true
      })
    }
  }
}

resource "terraform_data" "filesystem" {
  for_each         = local.filesystem_requests
  triggers_replace = merge(each.value, { idempotency_key = local.filesystem_keys[each.key] })

  provisioner "local-exec" {
    command = "${local.npa_api} create_filesystem --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode(merge(each.value, { idempotency_key = local.filesystem_keys[each.key] }))
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api delete_filesystem --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({
        filesystem_id = "computefilesystem-e00${substr(sha256("computefilesystem/${self.triggers_replace.idempotency_key}"), 0, 15)}"
        missing_ok    = true
      })
    }
  }
}

resource "terraform_data" "gpu_cluster" {
  for_each         = local.gpu_cluster_requests
  triggers_replace = merge(each.value, { idempotency_key = local.gpu_cluster_keys[each.key] })

  provisioner "local-exec" {
    command = "${local.npa_api} create_gpu_cluster --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode(merge(each.value, { idempotency_key = local.gpu_cluster_keys[each.key] }))
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api delete_gpu_cluster --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({
        gpu_cluster_id = "computegpucluster-e00${substr(sha256("computegpucluster/${self.triggers_replace.idempotency_key}"), 0, 15)}"
        missing_ok     = true
      })
    }
  }
}

resource "terraform_data" "node_group" {
  for_each         = local.node_groups
  triggers_replace = merge(each.value, { idempotency_key = local.node_group_keys[each.key] })
  depends_on       = [terraform_data.cluster, terraform_data.filesystem, terraform_data.gpu_cluster]

  provisioner "local-exec" {
    command = "${local.npa_api} create_node_group --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode(merge(each.value, { idempotency_key = local.node_group_keys[each.key], wait = true }))
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api delete_node_group --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({
        node_group_id = "mk8snodegroup-e00${substr(sha256("mk8snodegroup/${self.triggers_replace.idempotency_key}"), 0, 15)}"
        missing_ok    = true
      })
    }
  }
}

# Flux's HelmReleases (operator, Slurm cluster): recorded as the cluster's addons, as JSON text.
resource "terraform_data" "slurm_cluster" {
  triggers_replace = { cluster_id = local.cluster_id, soperator = jsonencode(local.slurm) }
  depends_on       = [terraform_data.node_group]

  provisioner "local-exec" {
    command = "${local.npa_api} set_cluster_addons --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({
        cluster_id = local.cluster_id
        addons = {
          gpu_driver = anytrue([for w in local.slurm.nodesets : w.gpu]) ? "operator" : ""
          filestore  = true
          soperator  = jsonencode(local.slurm)
        }
      })
    }
  }
}
