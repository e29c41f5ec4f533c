#!/usr/bin/env bash
# `make demo`: deploy the example fleet to the embedded local cloud, show its state, and say how to tear
# it down. Everything runs against $HOME/.npa-pulumi (state, passphrase, local cloud), the same default
# backend that this repository's Pulumi.yaml names; examples/demo-env.sh exports it resolved, so
# `pulumi stack ls` here shows the demo's stacks even where $HOME is not the account's home.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=examples/demo-env.sh
source examples/demo-env.sh
NPA=.venv/bin/npa-pulumi
SPEC=examples/fleet1-test.yaml

step() { printf '\n\033[1m==> %s\033[0m\n' "$*" >&2; }

step "The embedded local cloud (a SQLite Nebius simulator seeded from examples/local-tenant.yaml)"
"$NPA" local-cloud init

step "Plan (offline: no cloud calls): $SPEC"
"$NPA" plan --spec "$SPEC"

step "Preflight: quota and reserved capacity for the whole fleet, before any change"
"$NPA" preflight --spec "$SPEC" --cloud local

step "Deploy: project stacks first, then one stack per cluster, 4 at a time"
"$NPA" up --spec "$SPEC" --cloud local --yes -j 4

step "Status: stack outputs checked against the live (local) cloud"
"$NPA" status --spec "$SPEC" --cloud local

step "Inside a cluster: kubectl get nodes with the kubeconfig that up wrote (a real API server per local cluster)"
kubectl --kubeconfig "${NPA_PULUMI_HOME:-$HOME/.npa-pulumi}/kubeconfigs/fleet-fleet1-test-a-cluster.yaml" \
  get nodes -L nebius.com/node-group-name -L nvidia.com/gpu.product

step "Per-cluster state in Pulumi itself: pulumi stack ls (in this directory; PULUMI_BACKEND_URL=$PULUMI_BACKEND_URL)"
demo_stack_ls

step "This machine: what the fleet needs and how to fix what is missing (npa-pulumi doctor)"
"$NPA" doctor --cloud local || true

step "Team use: a private state bucket in the local cloud, served over S3 like Nebius Object Storage"
"$NPA" backend init --cloud local --bucket fleet1-team-state

cat >&2 <<'MSG'

Done. Next steps:
  make demo                      # again: an unchanged fleet is a no-op
  .venv/bin/npa-pulumi preview --spec examples/fleet1-test.yaml --output markdown   # a PR-style preview
  .venv/bin/npa-pulumi destroy --spec examples/fleet1-test.yaml --yes              # tear the clusters down
  (eval the exports printed above, then `up --spec ... --backend "$PULUMI_BACKEND_URL"` keeps a fleet's
   state in that bucket, as a team would: docs/team-use.md)
      (projects and buckets are retained, like on Nebius; `npa-pulumi local-cloud reset --yes` wipes the
       simulated cloud, and `rm -rf ~/.npa-pulumi` everything the demo created)
MSG
