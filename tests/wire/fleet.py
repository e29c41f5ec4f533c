"""What the wire tests that run the CLI share: the checkout, the offline recipe their plans need, an SSH
key, the project the fake's tenant already has, and the keyless (federated-credentials) CI fleet."""

from __future__ import annotations

from pathlib import Path

from upstream_library import upstream_library

REPO = Path(__file__).resolve().parents[2]
# The real upstream library beside the checkout (tests/upstream_library.py): plans need a recipe read
# offline, not a cloud; a `--recipe-dir` of it is a library root (k8s-training/ and modules/).
RECIPE = upstream_library()
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
