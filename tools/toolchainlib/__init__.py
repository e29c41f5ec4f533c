"""npa-pulumi's toolchain, one module per concern (tools/toolchain.py is the command that runs it).

* `pins`: tools/pins.toml, the one place a toolchain version is written.
* `common`: what every component shares: messages, commands, links in .tools/bin, the per-user cache and
  building into it under a lock, the Go environment.
* one module per component, each with one `ensure(pins)`: `venv`, `pulumi` (the engine), `tofu`
  (terraform), `kubernetes` (the local cloud's control plane), `kwok`, `kubernetes_provider`
  (pulumi-resource-kubernetes), `kuberay` (the operator and its CRDs), `localcloud_providers` (the local
  cloud's Terraform providers, built from tools/localcloud-providers and laid out as an unpacked filesystem
  mirror in .tools/terraform-providers), `seaweedfs` (`weed`, the local cloud's S3 server, built in the
  wrapper module tools/seaweedfs), `chromium` (the report's browser test).
* `registry`: the components `ensure` knows, one entry each; `lanes`: the Go builds run two at a time.
* `status` and `cli`: the script's commands.

Adding a pinned tool: its versions in tools/pins.toml, a module with its `ensure(pins)` (most build
through `common.build_into_cache`, which keys the cache directory by the pins), and one entry in
`registry.COMPONENTS`. Standard library only: this runs before the virtualenv exists.
"""
