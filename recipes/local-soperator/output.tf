# The example installation declares no outputs; its modules' (cluster_id, control_plane, jail, ...) are
# exported here under the names the fleet reads.

output "cluster_id" {
  value = local.cluster_id
}

output "cluster_name" {
  value = local.cluster_name
}

output "endpoint" {
  value = local.public_endpoint
}

output "node_group_ids" {
  description = "Every node group: the roles, then each worker set's chunks."
  value       = [for k in sort(keys(local.node_group_ids)) : local.node_group_ids[k]]
}

output "filesystem_id" {
  description = "The jail (what every Slurm node mounts)."
  value       = local.filesystem_ids["jail"]
}

output "filestores" {
  value = local.filesystem_ids
}

output "gpu_cluster_ids" {
  value = local.gpu_cluster_ids
}

output "slurm_cluster" {
  description = "The Slurm cluster Flux installs: {name, namespace, operator_version, nodesets[]}."
  value       = local.slurm
}

output "npa_live_objects" {
  description = "What npa-pulumi checks against the cloud to find drift (npa_pulumi/bridge/drift.py)."
  value = merge(
    { "terraform_data.cluster" = { kind = "cluster", id = local.cluster_id, node_count = null } },
    { for k, id in local.node_group_ids : "terraform_data.node_group[\"${k}\"]" => { kind = "node_group", id = id, node_count = local.node_groups[k].node_count } },
    { for k, r in local.filesystem_requests : "terraform_data.filesystem[\"${k}\"]" => { kind = "filesystem", id = local.filesystem_ids[k], node_count = null } },
    { for k, id in local.gpu_cluster_ids : "terraform_data.gpu_cluster[\"${k}\"]" => { kind = "gpu_cluster", id = id, node_count = null } },
  )
}
