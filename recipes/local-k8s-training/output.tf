output "cluster_id" {
  description = "The mk8s cluster's ID."
  value       = local.cluster_id
}

output "cluster_name" {
  value = var.cluster_name
}

output "endpoint" {
  description = "The control plane's endpoint (public when mk8s_cluster_public_endpoint)."
  value       = var.mk8s_cluster_public_endpoint ? local.public_endpoint : local.private_endpoint
}

output "kube_cluster" {
  description = "Shaped like upstream's kube_cluster output."
  value = {
    id   = local.cluster_id
    name = var.cluster_name
    endpoints = {
      public_endpoint  = var.mk8s_cluster_public_endpoint ? local.public_endpoint : null
      private_endpoint = local.private_endpoint
    }
  }
}

output "cpu_node_group_id" {
  value = local.cpu_node_group_id
}

output "gpu_node_group_ids" {
  value = local.gpu_node_group_ids
}

output "node_group_ids" {
  description = "Every node group: the CPU group first, then the GPU groups in order."
  value       = concat([local.cpu_node_group_id], local.gpu_node_group_ids)
}

output "filesystem_id" {
  description = "The shared filesystem (created or existing); null without one."
  value       = local.filesystem_id
}

output "gpu_cluster_id" {
  description = "The InfiniBand GPU cluster; null without GPU clustering."
  value       = local.gpu_cluster_id
}

output "filesystem_attachments" {
  description = "How each node group attaches the shared filesystem: [{node_group, attach_mode, mount_tag}]."
  value       = var.enable_filestore ? local.filesystem_attachments : []
}

output "filesystem_mount" {
  description = "How every node mounts the shared filesystem: {path, tag, fs_type, options}; null without one."
  value       = var.enable_filestore ? local.filesystem_mount : null
}

output "shared-filesystem" {
  description = "Upstream's output of the same name: {id, size_gibibytes, mount_tag}, null without one."
  value = var.enable_filestore ? {
    id             = local.filesystem_id
    size_gibibytes = var.filestore_disk_size_gibibytes
    mount_tag      = var.filestore_mount_tag
  } : null
}

output "filesystem_csi" {
  description = "Upstream's output of the same name (the CSI chart is not simulated, only described)."
  value = var.enable_filestore ? {
    release_name               = "csi-mounted-fs-path"
    namespace                  = var.filesystem_csi.namespace
    chart_repository           = var.filesystem_csi.chart_repository
    chart_version              = var.filesystem_csi.chart_version
    storage_class_name         = "csi-mounted-fs-path-sc"
    make_default_storage_class = var.filesystem_csi.make_default_storage_class
  } : null
}

output "npa_live_objects" {
  description = <<-EOT
    What npa-pulumi checks against the cloud to find drift (npa_pulumi/bridge/drift.py): each Terraform
    address that made a cloud object, with the object's kind and ID and, for a fixed-size node group, its
    node count. terraform_data cannot read the cloud back, so a refresh alone never sees such drift.
  EOT
  value = merge(
    { "terraform_data.cluster" = { kind = "cluster", id = local.cluster_id, node_count = null } },
    {
      "terraform_data.cpu_node_group" = {
        kind       = "node_group"
        id         = local.cpu_node_group_id
        node_count = var.cpu_nodes_autoscaling.enabled ? null : local.cpu_node_count
      }
    },
    {
      for i, id in local.gpu_node_group_ids : "terraform_data.gpu_node_group[${i}]" => {
        kind       = "node_group"
        id         = id
        node_count = var.gpu_nodes_autoscaling.enabled ? null : local.gpu_node_count
      }
    },
    local.create_filestore ? {
      "terraform_data.filesystem[0]" = { kind = "filesystem", id = local.filesystem_id, node_count = null }
    } : {},
    local.gpu_cluster_enabled ? {
      "terraform_data.gpu_cluster[0]" = { kind = "gpu_cluster", id = local.gpu_cluster_id, node_count = null }
    } : {},
  )
}
