# The InfiniBand GPU cluster the GPU node groups join. On when enable_gpu_cluster is true; when it is
# null (V3/V4 behaviour), on whenever infiniband_fabric is set.

locals {
  fabric_input        = var.infiniband_fabric == null ? "" : trimspace(var.infiniband_fabric)
  gpu_cluster_enabled = var.enable_gpu_cluster == null ? local.fabric_input != "" : var.enable_gpu_cluster
  gpu_cluster_fabric  = local.fabric_input != "" ? local.fabric_input : local.region_default.infiniband_fabric
  gpu_cluster_key     = "${local.idempotency_scope}/computegpucluster/${local.gpu_cluster_request.name}/${sha256(jsonencode(local.gpu_cluster_request))}"
  gpu_cluster_id      = local.gpu_cluster_enabled ? "computegpucluster-e00${substr(sha256("computegpucluster/${local.gpu_cluster_key}"), 0, 15)}" : null

  gpu_cluster_request = {
    project_id = var.parent_id
    name       = "${var.cluster_name}-${local.gpu_cluster_fabric}"
    fabric     = local.gpu_cluster_fabric
  }
}

resource "terraform_data" "gpu_cluster" {
  count            = local.gpu_cluster_enabled ? 1 : 0
  triggers_replace = merge(local.gpu_cluster_request, { idempotency_key = local.gpu_cluster_key })

  lifecycle {
    precondition {
      condition     = local.gpu_cluster_fabric != ""
      error_message = "GPU clustering is on but infiniband_fabric is empty and region ${var.region} has no default fabric."
    }
  }

  provisioner "local-exec" {
    command = "${local.npa_api} create_gpu_cluster --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode(merge(local.gpu_cluster_request, { idempotency_key = local.gpu_cluster_key }))
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api delete_gpu_cluster --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({
        gpu_cluster_id = "computegpucluster-e00${substr(sha256("computegpucluster/${try(self.triggers_replace.idempotency_key, self.id)}"), 0, 15)}"
        missing_ok     = true
      })
    }
  }
}
