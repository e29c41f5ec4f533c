"""Talking to Kubernetes API servers: kubeconfigs and a small typed client.

Shared by the local cloud (which runs a real API server per cluster and shapes its nodes) and the engine
(which writes users' kubeconfigs and checks what is inside a cluster). Standard library only, so it loads
fast inside plugin hosts and agents.
"""
