"""The real upstream k8s-training module, as tests read it: ../shared/upstream/nebius-solutions-library
beside the checkout (shared/README.md; a dependency, never copied into the repository), or the directory
`$NPA_K8S_TRAINING_MIRROR` names. A test that needs it fails when neither exists: a stand-in of upstream's
surface would check nothing."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def upstream_library() -> Path:
    """The library root holding `k8s-training/` and `modules/` at the pinned commit."""
    configured = os.environ.get("NPA_K8S_TRAINING_MIRROR", "").strip()
    candidates = [Path(configured)] if configured else []
    candidates.append(REPO.parent / "shared" / "upstream" / "nebius-solutions-library")
    for candidate in candidates:
        if (candidate / "k8s-training" / "main.tf").is_file():
            return candidate
    raise AssertionError(
        "the upstream k8s-training module is not beside this checkout (../shared/upstream/"
        "nebius-solutions-library) and NPA_K8S_TRAINING_MIRROR names none: these tests run on the real module"
    )


def writable_copy(destination: Path) -> Path:
    """A copy of the library that a test may change (shared/ is read-only), returned as its root."""
    shutil.copytree(upstream_library(), destination, ignore=shutil.ignore_patterns(".git"))
    for path in [destination, *destination.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return destination
