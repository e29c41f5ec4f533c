"""`cleanup --full` (engine/teardown/local_cleanup.py): failed scratch cleanups and caches of earlier
layouts are found, reported and removed only where they are provably npa's; look-alikes stay."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from npa_pulumi.engine.teardown import local_cleanup as home_cleanup

OLD = time.time() - 3 * 86_400
TF_PROVIDER = "registry.terraform.io/hashicorp/null/3.2.4/linux_amd64/terraform-provider-null_v3.2.4_x5"


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    home, tmp, original = tmp_path / "npa-home", tmp_path / "tmp", tmp_path / "dot-npa"
    for path in (home, tmp, original):
        path.mkdir()
    monkeypatch.setenv("NPA_PULUMI_HOME", str(home))
    monkeypatch.setenv("NPA_CONFIG_DIR", str(original))
    monkeypatch.setattr("tempfile.tempdir", str(tmp))
    yield {"home": home, "tmp": tmp, "original": original}


def _age(path: Path) -> None:
    for item in [path, *path.rglob("*")]:
        os.utime(item, (OLD, OLD), follow_symlinks=False)


def _scratch(tmp: Path, name: str, files: dict[str, str], mode: int = 0o700, old: bool = True) -> Path:
    path = tmp / name
    path.mkdir()
    for relative, text in files.items():
        (path / relative).parent.mkdir(parents=True, exist_ok=True)
        (path / relative).write_text(text)
    path.chmod(mode)
    if old:
        _age(path)
    return path


def _survey() -> dict[str, home_cleanup.HomeItem]:
    report = home_cleanup.survey("file:///nonexistent-backend", full=True)
    return {Path(i.path).name: i for i in report.items if i.kind in ("failed-scratch", "earlier-layout")}


def test_failed_scratch_of_each_kind_is_found_and_removed(places: dict[str, Path]) -> None:
    tmp = places["tmp"]
    planted = [
        _scratch(tmp, "npa-plan-ab12cd_3", {"work/k8s-training/main.tf": "", "preview.tfplan": "x"}),
        _scratch(tmp, "npa-kube-zz9x8y7w", {"tls.crt": "c", "tls.key": "k"}),
        _scratch(tmp, "npa-policy-config-q1w2e3r4", {"builtin.json": "{}", "others.json": "{}"}),
        _scratch(tmp, "npa-engine-trace-a1b2c3d4", {"0001-fleet.p.c.jsonl": "{}"}),
    ]
    found = _survey()
    assert {p.name for p in planted} <= set(found)
    for path in planted:
        item = found[path.name]
        assert item.kind == "failed-scratch" and item.removable, item
        assert "left by a run that did not finish" in item.reason
    # Not without --full.
    plain = home_cleanup.survey("file:///nonexistent-backend")
    assert plain.scope == "local" and not any(i.kind == "failed-scratch" for i in plain.items)
    report = home_cleanup.survey("file:///nonexistent-backend", full=True)
    home_cleanup.remove_residue(report)
    assert not any(p.exists() for p in planted)
    assert sorted(Path(p).name for p in report.removed) == sorted(p.name for p in planted)


def test_scratch_look_alikes_stay(places: dict[str, Path]) -> None:
    tmp = places["tmp"]
    open_mode = _scratch(tmp, "npa-kube-aaaaaaaa", {"tls.crt": "c"}, mode=0o755)
    extra = _scratch(tmp, "npa-kube-bbbbbbbb", {"tls.crt": "c", "notes.txt": "mine"})
    recent = _scratch(tmp, "npa-plan-cccccccc", {"preview.tfplan": "x"}, old=False)
    wrong_work = _scratch(tmp, "npa-plan-dddddddd", {"work": "a file, not the scratch work dir"})
    elsewhere = _scratch(tmp, "real-dir", {"tls.crt": "c"})
    (tmp / "npa-kube-eeeeeeee").symlink_to(elsewhere)
    odd_name = _scratch(tmp, "npa-kube-toolong123", {"tls.crt": "c"})
    found = _survey()
    for path, why in (
        (open_mode, "mode 755"),
        (extra, "does not write there"),
        (recent, "within the last hour"),
        (wrong_work, "does not write there"),
        (tmp / "npa-kube-eeeeeeee", "not a plain directory"),
    ):
        item = found[path.name]
        assert not item.removable and why in item.reason, item
    assert odd_name.name not in found  # not a name mkdtemp gives: not even reported
    report = home_cleanup.survey("file:///nonexistent-backend", full=True)
    home_cleanup.remove_residue(report)
    for path in (open_mode, extra, recent, wrong_work, odd_name, elsewhere):
        assert path.exists()
    assert (elsewhere / "tls.crt").exists()


def test_scratch_a_process_still_uses_stays(places: dict[str, Path]) -> None:
    busy = _scratch(places["tmp"], "npa-plan-eeeeeeee", {"work/main.tf": ""})
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], cwd=busy / "work")
    try:
        _age(busy)
        item = _survey()[busy.name]
        assert not item.removable and "a running process uses it" in item.reason
    finally:
        proc.kill()
        proc.wait()
    assert _survey()[busy.name].removable


def _wrapper(home: Path, name: str, text: str) -> Path:
    path = home / "bin" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _host(python: str) -> str:
    return f'#!/bin/sh\nexec {python} -u -m npa_pulumi.runtime.plugin_host "$@"\n'


def test_plugin_wrappers_of_an_earlier_install_go_and_current_ones_stay(places: dict[str, Path]) -> None:
    home, tmp = places["home"], places["tmp"]
    gone = _wrapper(home, "plugin-python-0123456789ab", _host(str(tmp / "old-venv" / "bin" / "python")))
    current = _wrapper(home, "plugin-python-ba9876543210", _host(sys.executable))
    foreign = _wrapper(home, "plugin-python-aaaaaaaaaaaa", "#!/bin/sh\necho my own script\n")
    guard = home / "bin" / "guarded-cafebabe0123"
    guard.mkdir()
    (guard / "pulumi-resource-kubernetes").write_text(
        f"#!/bin/sh\nexec {sys.executable} -m npa_pulumi.runtime.plugin_guard "
        f'{tmp / "old" / "pulumi-resource-kubernetes"} "$@"\n'
    )
    found = _survey()
    assert found[gone.name].removable and "earlier install" in found[gone.name].reason
    assert found[guard.name].removable
    assert not found[current.name].removable and "still exists" in found[current.name].reason
    assert not found[foreign.name].removable and "not a wrapper" in found[foreign.name].reason
    report = home_cleanup.survey("file:///nonexistent-backend", full=True)
    home_cleanup.remove_residue(report)
    assert not gone.exists() and not guard.exists()
    assert current.exists() and foreign.exists()


def test_the_original_tools_provider_cache_goes_only_when_it_holds_providers_alone(
    places: dict[str, Path],
) -> None:
    fleet = places["original"] / "fleet"
    clean = fleet / "old-fleet" / ".tf-plugin-cache"
    (clean / TF_PROVIDER).parent.mkdir(parents=True)
    (clean / TF_PROVIDER).write_text("binary")
    packed = clean / "registry.opentofu.org/nebius/nebius/terraform-provider-nebius_0.5.1_linux_amd64.zip"
    packed.parent.mkdir(parents=True)
    packed.write_text("zip")
    install = fleet / "old-fleet" / "alpha" / "c1" / "k8s-training"
    install.mkdir(parents=True)
    (install / "terraform.tfstate").write_text("{}")
    mixed = fleet / "other-fleet" / ".tf-plugin-cache"
    (mixed / TF_PROVIDER).parent.mkdir(parents=True)
    (mixed / TF_PROVIDER).write_text("binary")
    (mixed / "terraform.tfstate").write_text("{}")
    report = home_cleanup.survey("file:///nonexistent-backend", full=True)
    items = {i.path: i for i in report.items if i.kind == "earlier-layout"}
    assert items[str(clean)].removable and "original npa fleet tool" in items[str(clean)].reason
    assert not items[str(mixed)].removable and "terraform.tfstate" in items[str(mixed)].reason
    home_cleanup.remove_residue(report)
    assert not clean.exists()
    assert (install / "terraform.tfstate").exists() and (mixed / "terraform.tfstate").exists()


def test_what_changed_after_the_survey_is_proved_again_before_removal(places: dict[str, Path]) -> None:
    scratch = _scratch(places["tmp"], "npa-kube-ffffffff", {"tls.crt": "c"})
    report = home_cleanup.survey("file:///nonexistent-backend", full=True)
    (scratch / "tls.crt").write_text("touched now")  # a run took it up again
    home_cleanup.remove_residue(report)
    assert scratch.exists()
    item = next(i for i in report.items if i.path == str(scratch))
    assert not item.removed and "within the last hour" in item.reason
