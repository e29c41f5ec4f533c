#!/usr/bin/env python3
"""Provide npa-pulumi's toolchain on this machine, idempotently and without the internet.

    python3 tools/toolchain.py ensure [all|venv|pulumi|terraform|...]   # what `make tools` runs
    python3 tools/toolchain.py status [--json]                           # what is in use, and from where

What it provides, in `.tools/bin` (git-ignored):

* `pulumi` at the version pinned in tools/pins.toml, plus the Python helper scripts the official
  distribution ships beside it (`pulumi-language-python-exec`, `pulumi-resource-pulumi-python`,
  `pulumi-analyzer-policy-python`). A `pulumi` on PATH in the supported range (pins.toml
  `supported_min` .. `supported_below`; exactly the pin with NPA_STRICT_TOOLCHAIN=1) is used as is;
  otherwise the pin is built from the Go module proxy through the wrapper module in tools/pulumi.
* `terraform`: a terraform or tofu on PATH at or above the pinned minimum, otherwise OpenTofu built from
  the Go module proxy through tools/tofu.
* the local cloud's Kubernetes (control plane, kwok) and pulumi-kubernetes' provider plugin, the
  KubeRay operator `kuberay-operator` with its CRDs as compact JSON (`kuberay-crds/`), and SeaweedFS's
  `weed` (the local cloud's S3 server), built through the wrapper module tools/seaweedfs.

Built binaries live in a per-user cache keyed by the pins
(`${XDG_CACHE_HOME:-~/.cache}/npa-pulumi/toolchain/<key>/bin`), so a fresh clone on the same machine links
them instead of rebuilding. The work is done by tools/toolchainlib/, one module per component (its
docstring says how to add one). Standard library only: this runs before the virtualenv exists.
"""

import sys
from pathlib import Path

if sys.version_info < (3, 11):  # noqa: UP036 - this script runs under whatever python3 is on PATH
    sys.exit(f"npa-pulumi needs Python >= 3.11; {sys.executable} is {sys.version.split()[0]}")

# The checkout first: tools.toolchainlib, and npa_pulumi.runtime (standard library only, so it serves here
# before the virtualenv exists).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.toolchainlib.cli import main

if __name__ == "__main__":
    sys.exit(main(description=__doc__))
