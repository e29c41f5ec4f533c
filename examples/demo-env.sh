# Sourced by examples/demo.sh (and by tests/integration/test_demo_home.py): the demo's environment and its
# `pulumi stack ls` step. Run from the repository root.
#
# One state directory wherever $HOME points: npa-pulumi expands the `~` of the default backend
# (file://~/.npa-pulumi/state, which this repository's Pulumi.yaml names too) from $HOME, the plain
# `pulumi` CLI from the account's entry in the user database. Where the two differ (a CI container with
# HOME set, `sudo -E`, HOME=$(mktemp -d)) `pulumi stack ls` would read another directory, find no state
# and exit 2. PULUMI_BACKEND_URL wins over Pulumi.yaml in both, so the resolved URL is exported.
export PATH="$PWD/.tools/bin:$PATH"
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_BACKEND_URL="${PULUMI_BACKEND_URL:-file://${NPA_PULUMI_HOME:-$HOME/.npa-pulumi}/state}"
case "$PULUMI_BACKEND_URL" in
  file://*) mkdir -p "${PULUMI_BACKEND_URL#file://}" ;;  # before the first `up` creates it
esac

demo_stack_ls() {
  pulumi stack ls --project npa-fleet
}
