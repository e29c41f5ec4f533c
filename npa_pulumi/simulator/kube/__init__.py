"""A real Kubernetes API behind every local mk8s cluster.

binaries.py      finding kwokctl, kwok, the control-plane binaries and etcd that `make tools` builds
controlplane.py  one cluster's control plane (kwokctl, binary runtime, 127.0.0.1 only): start, stop, reap
shapes.py        what a real cluster holds: Nodes shaped like the node groups' presets, the recipe's
                 objects (driver DaemonSets, StorageClasses, KubeRay), kwok Stages for faults
system.py        the managed cluster's own kube-system workloads and their PodDisruptionBudgets (once)
agent.py         the per-cluster agent: starts the control plane, keeps the API in step with the
                 simulator's records, and stops everything when the cluster (or the cloud) is gone
"""
