"""What the wire tests that run the CLI share: the checkout, the offline recipe their plans need, an SSH
key, the project the fake's tenant already has, and the keyless (federated-credentials) CI fleet."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The wire tests' plans need a recipe whose plan runs without any provider (no registry is reachable and
# `--cloud nebius` never uses the local cloud's): a module of their own (offline-recipe/k8s-training/main.tf
# says what it is), never upstream's stand-in.
RECIPE = Path(__file__).resolve().parent / "offline-recipe"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOwireWIREwireWIREwireWIREwireWIREwireWIREwi wire@test"
EXISTING_PROJECT = "project-e00existing"

# One CPU cluster in the existing project: what a CI job with federated credentials deploys.
KEYLESS_SPEC = f"""apiVersion: npa.fleet/v0.0.1
name: keyless
region: eu-north1
ssh_public_key: "{SSH_KEY}"
defaults:
  cpu_nodes: {{ count: 1, platform: cpu-d3, preset: 4vcpu-16gb }}
  enable_filestore: false
projects:
  - project_id: {EXISTING_PROJECT}
    clusters:
      - name: ci
"""
