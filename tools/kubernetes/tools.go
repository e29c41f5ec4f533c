//go:build tools

// Package tools keeps the Kubernetes control-plane commands, kubectl and etcd in this wrapper's module
// graph. The build tag keeps it out of every normal build; `go build` names the packages itself.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
