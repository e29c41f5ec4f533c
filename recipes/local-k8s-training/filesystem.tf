# The shared filesystem: created when enable_filestore is on and existing_filestore is empty, attached
# READ_WRITE to every CPU and GPU node group, and mounted by every node as virtiofs with `nofail`, so a
# node still boots when the filesystem is missing (upstream mounts with plain "defaults").

locals {
  # What the nodes do with the shared filesystem. Only literals and whole `var.` references here: npa-pulumi
  # reads this block statically (npa_pulumi/bridge/facts.py) and substitutes the tfvars, so policies can
  # check the mount before anything is applied. The same values are outputs after apply.
  filesystem_mount = {
    path    = var.filestore_mount_path
    tag     = var.filestore_mount_tag
    fs_type = "virtiofs"
    options = "defaults,nofail"
  }
  filesystem_attachments = [
    { node_group = "cpu", attach_mode = "READ_WRITE", mount_tag = var.filestore_mount_tag },
    { node_group = "gpu", attach_mode = "READ_WRITE", mount_tag = var.filestore_mount_tag },
  ]
}

locals {
  existing_filestore = var.existing_filestore == null ? "" : trimspace(var.existing_filestore)
  create_filestore   = var.enable_filestore && local.existing_filestore == ""
  filesystem_key     = "${local.idempotency_scope}/computefilesystem/${local.filesystem_request.name}/${sha256(jsonencode(local.filesystem_request))}"
  filesystem_id = (
    !var.enable_filestore ? null :
    local.create_filestore ? "computefilesystem-e00${substr(sha256("computefilesystem/${local.filesystem_key}"), 0, 15)}" :
    local.existing_filestore
  )

  filesystem_request = {
    project_id       = var.parent_id
    name             = "${var.cluster_name}-filesystem"
    size_bytes       = floor(var.filestore_disk_size_gibibytes * 1073741824)
    disk_type        = var.filestore_disk_type
    block_size_bytes = floor(var.filestore_block_size_kibibytes * 1024)
    labels           = local.labels
  }

  # What each node group sends the simulator: the attachments above, bound to the filesystem id.
  node_group_attachments = var.enable_filestore ? [
    for a in local.filesystem_attachments : merge(a, { filesystem_id = local.filesystem_id })
  ] : []
}

resource "terraform_data" "filesystem" {
  count            = local.create_filestore ? 1 : 0
  triggers_replace = merge(local.filesystem_request, { idempotency_key = local.filesystem_key })

  provisioner "local-exec" {
    command = "${local.npa_api} create_filesystem --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode(merge(local.filesystem_request, { idempotency_key = local.filesystem_key }))
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api delete_filesystem --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({
        filesystem_id = "computefilesystem-e00${substr(sha256("computefilesystem/${try(self.triggers_replace.idempotency_key, self.id)}"), 0, 15)}"
        missing_ok    = true
      })
    }
  }
}
