"""Talking to Kubernetes API servers: kubeconfigs, a small typed client, and what reads a cluster through
it (the GPU health gate, the storage, fabric and Slurm checks, a whole cluster's drain: drain.py).

Shared by the local cloud (which runs a real API server per cluster and shapes its nodes) and the engine
(which writes users' kubeconfigs and checks what is inside a cluster). Standard library only, so it loads
fast inside plugin hosts and agents.
"""
