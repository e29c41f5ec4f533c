"""The Python half of the local cloud's Terraform providers (tools/localcloud-providers/PROTOCOL.md).

The Go shim serves each provider upstream k8s-training requires at the plugin protocol seam and hands every
CRUD call here, one worker process per provider process: nebius types act on the local cloud's database,
Kubernetes-side types (helm, kubernetes, kubectl) on the cluster's real API server."""
