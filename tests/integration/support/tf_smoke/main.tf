# Built-in features only: no providers, so no registry access is possible.
variable "greeting" {
  type = string
}

variable "marker_dir" {
  type = string
}

resource "terraform_data" "hello" {
  input = var.greeting

  provisioner "local-exec" {
    command = "echo created-${self.input} > ${var.marker_dir}/created.txt"
  }

  provisioner "local-exec" {
    when    = destroy
    command = "echo destroyed > ${self.triggers_replace}/destroyed.txt"
  }

  triggers_replace = var.marker_dir
}

output "greeting" {
  value = terraform_data.hello.output
}
