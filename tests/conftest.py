"""Shared fixtures: every test runs with a private HOME, npa home, local-cloud dir and terraform config,
so nothing touches the developer's real ~/.npa-pulumi, ~/.nebius or ~/.pulumi."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

# No test starts a Kubernetes API server unless it asks for one (the `kube_api` fixture): see isolated_home.
os.environ.setdefault("NPA_LOCAL_CLOUD_KUBERNETES_API", "0")
# A machine whose environment names a terraform CLI configuration that does not exist (seen:
# TF_CLI_CONFIG_FILE=/root/.terraformrc and no such file) makes OpenTofu print a warning on stdout, before a
# `version -json` document: the bridge drops such a setting for every terraform it runs (bridge/terraform.py),
# and so do the tests that run terraform themselves.
if os.environ.get("TF_CLI_CONFIG_FILE") and not os.path.isfile(os.environ["TF_CLI_CONFIG_FILE"]):
    del os.environ["TF_CLI_CONFIG_FILE"]
# Every deployment on the local cloud runs the default recipe, as a user's does: upstream k8s-training at the
# pinned commit from the library beside the checkout (tests/upstream_library.py; `make` exports the same
# variable), with the fleet's override files, on the local cloud's own Terraform providers.
if not os.environ.get("NPA_K8S_TRAINING_MIRROR"):
    from upstream_library import upstream_library

    os.environ["NPA_K8S_TRAINING_MIRROR"] = str(upstream_library())

# ------------------------------------------------------------------ longest modules first
# `make test` gives whole modules to two workers (--dist loadfile --no-loadscope-reorder), in collection
# order: a long module handed out last keeps one worker busy while the other core idles. So modules run
# longest first, by the seconds the last run on this checkout recorded in pytest's cache; a module with no
# record (every module of a fresh clone) is estimated by what it starts.
MODULE_SECONDS_KEY = "npa/module-seconds"
ESTIMATED_SECONDS = {"kube_api": 60.0, "integration": 15.0}
UNKNOWN_SECONDS = 1.0


def _module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _estimated_seconds(items: list[pytest.Item]) -> float:
    if any("kube_api" in getattr(item, "fixturenames", ()) for item in items):
        return ESTIMATED_SECONDS["kube_api"]
    if any(item.get_closest_marker("integration") for item in items):
        return ESTIMATED_SECONDS["integration"]
    return UNKNOWN_SECONDS


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cache = getattr(config, "cache", None)
    recorded: dict[str, float] = cache.get(MODULE_SECONDS_KEY, {}) if cache is not None else {}
    modules: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        modules[_module_of(item.nodeid)].append(item)
    order = {module: index for index, module in enumerate(modules)}
    seconds = {module: recorded.get(module) or _estimated_seconds(its) for module, its in modules.items()}
    items.sort(key=lambda item: (-seconds[_module_of(item.nodeid)], order[_module_of(item.nodeid)]))


_measured_seconds: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _measured_seconds[_module_of(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Record each module's seconds for the next run's order (the controller only: it sees every report)."""
    cache = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _measured_seconds:
        return
    recorded = dict(cache.get(MODULE_SECONDS_KEY, {}))
    recorded.update({module: round(seconds, 1) for module, seconds in _measured_seconds.items()})
    cache.set(MODULE_SECONDS_KEY, recorded)


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    tf_config = tmp_path / "terraformrc"
    tf_config.write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NPA_PULUMI_HOME", str(home / ".npa-pulumi"))
    monkeypatch.setenv("NPA_LOCAL_CLOUD_DIR", str(home / ".npa-pulumi" / "local-cloud"))
    monkeypatch.setenv("PULUMI_HOME", str(home / ".pulumi"))
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", str(tf_config))
    monkeypatch.setenv("CHECKPOINT_DISABLE", "1")
    # A Kubernetes API server per local cluster costs ~0.5 GB and a few seconds: tests that look inside a
    # cluster turn it on (the `kube_api` fixture); the others deploy without one.
    monkeypatch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "0")
    for var in (
        "PULUMI_BACKEND_URL",
        "PULUMI_CONFIG_PASSPHRASE",
        "PULUMI_CONFIG_PASSPHRASE_FILE",
        "NEBIUS_IAM_TOKEN",
        "NPA_CONFIG_DIR",  # the original's registrations and config.yaml: HOME/.npa in every test
    ):
        monkeypatch.delenv(var, raising=False)
    yield home
    # Whatever a test left running (a cluster's agent and control plane, the S3 server) stops with it.
    from npa_pulumi.simulator import seaweedd
    from npa_pulumi.simulator.kube import lifecycle

    lifecycle.stop_all(home / ".npa-pulumi" / "local-cloud")
    seaweedd.stop(home / ".npa-pulumi" / "local-cloud")


@pytest.fixture
def kube_api(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The local cloud with a real Kubernetes API server (kwok nodes) behind every cluster. Temporary files
    go to a directory of the test's own (TMPDIR), where a test can see what the run left behind; a short
    path, as Unix sockets made there (Chromium's) allow 107 bytes."""
    monkeypatch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "1")
    private_tmp = tempfile.mkdtemp(prefix="npa-test-")
    monkeypatch.setenv("TMPDIR", private_tmp)
    yield isolated_home
    shutil.rmtree(private_tmp, ignore_errors=True)


@pytest.fixture
def upstream_recipe() -> Path:
    """The upstream library every local deployment runs (set for the whole suite above): named by the tests
    that read the module's own files."""
    return Path(os.environ["NPA_K8S_TRAINING_MIRROR"])
