"""The engine names no backend outside that backend's folder (issue 60): what it needs of one is said by
the backend interface (engine/backends/base.py). The same check as the issue's grep, over every module."""

from __future__ import annotations

import re
from pathlib import Path

import npa_pulumi.engine
from npa_pulumi.engine.backends.registry import BACKENDS
from npa_pulumi.spec.constants import BackendKind

ENGINE = Path(npa_pulumi.engine.__file__).resolve().parent
# What each backend is called besides its kind: the workload it runs.
ALSO_CALLED = {BackendKind.SOPERATOR: ("slurm",)}


def test_no_engine_module_outside_a_backends_folder_names_that_backend() -> None:
    offenders: list[str] = []
    for kind in BACKENDS:
        if kind is BackendKind.MK8S:
            continue  # the default backend's name is the engine's vocabulary (mk8s clusters, the API)
        names = re.compile("|".join((kind.value, *ALSO_CALLED.get(kind, ()))), re.IGNORECASE)
        own = ENGINE / "backends" / kind.value
        for path in sorted(ENGINE.rglob("*.py")):
            if own in path.parents:
                continue
            offenders += [
                f"{path.relative_to(ENGINE)}:{number}: {line.strip()}"
                for number, line in enumerate(path.read_text().splitlines(), 1)
                if names.search(line)
            ]
    assert offenders == []
