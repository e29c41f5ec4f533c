"""The one module that reads and writes the engine's private DIY files (engine.diy_backend) understands
exactly the format versions of the pinned engine, and answers "ask the engine" for anything else.
tests/integration/test_diy_backend_formats.py checks that the pinned engine writes these versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npa_pulumi.engine.automation import diy_backend as diy

PROJECT = "npa-fleet"


def test_the_format_versions_it_understands() -> None:
    # Changing one of these means the pinned engine changed its files: re-check every reader below.
    assert (diy.META_VERSION, diy.TAGS_VERSION, diy.CHECKPOINT_VERSION) == (1, 1, 3)


@pytest.fixture
def backend(tmp_path: Path) -> tuple[str, Path]:
    root = tmp_path / "state"
    (root / ".pulumi" / "stacks" / PROJECT).mkdir(parents=True)
    (root / ".pulumi" / "meta.yaml").write_text("version: 1\n")
    return f"file://{root}", root / ".pulumi" / "stacks" / PROJECT


def _checkpoint(version: int = 3, pending: list[object] | None = None) -> str:
    stack = {
        "urn": "urn:pulumi:s::npa-fleet::pulumi:pulumi:Stack::npa-fleet-s",
        "type": "pulumi:pulumi:Stack",
        "outputs": {
            "plain": "v",
            "key": {diy.SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "x"},
        },
    }
    latest = {"resources": [stack], "pending_operations": pending or []}
    return json.dumps({"version": version, "checkpoint": {"latest": latest}})


def test_layouts_it_does_not_know_are_left_to_the_engine(tmp_path: Path) -> None:
    assert diy.stacks_dir("s3://bucket", PROJECT) is None
    root = tmp_path / "b"
    assert diy.stacks_dir(f"file://{root}", PROJECT) == root / ".pulumi" / "stacks" / PROJECT  # empty
    (root / ".pulumi").mkdir(parents=True)
    assert diy.stacks_dir(f"file://{root}", PROJECT) is None  # legacy layout: no meta.yaml
    (root / ".pulumi" / "meta.yaml").write_text("version: 2\n")
    assert diy.stacks_dir(f"file://{root}", PROJECT) is None


def test_checkpoint_outputs_mask_secrets(backend: tuple[str, Path]) -> None:
    url, stacks = backend
    assert diy.checkpoint_outputs(url, "s", PROJECT) is None  # no such stack
    (stacks / "s.json").write_text(_checkpoint())
    assert diy.checkpoint_outputs(url, "s", PROJECT) == {"plain": "v", "key": diy.SECRET_PLACEHOLDER}
    assert not diy.has_pending_operations(url, "s", PROJECT)
    (stacks / "s.json").write_text(_checkpoint(version=4))
    assert diy.checkpoint_outputs(url, "s", PROJECT) is diy.NO_FAST_PATH
    (stacks / "s.json").write_text("{torn")
    assert diy.checkpoint_outputs(url, "s", PROJECT) is diy.NO_FAST_PATH


def test_pending_operations_and_locks_mean_interrupted(backend: tuple[str, Path]) -> None:
    url, stacks = backend
    (stacks / "s.json").write_text(_checkpoint(pending=[{"resource": {"urn": "u"}, "type": "creating"}]))
    assert diy.has_pending_operations(url, "s", PROJECT)
    assert diy.interrupted(url, "s", PROJECT)
    (stacks / "s.json").write_text(_checkpoint())
    assert not diy.interrupted(url, "s", PROJECT)
    lock_dir = Path(url.removeprefix("file://")) / ".pulumi" / "locks" / "organization" / PROJECT / "s"
    lock_dir.mkdir(parents=True)
    body = {"pid": 1, "username": "u", "hostname": "h", "timestamp": "2026-11-29T00:00:00Z"}
    (lock_dir / "abc.json").write_text(json.dumps(body))
    [lock] = diy.read_locks(url, PROJECT, "s")
    assert (lock.pid, lock.hostname, lock.timestamp) == (1, "h", "2026-11-29T00:00:00Z")
    assert diy.interrupted(url, "s", PROJECT)


def test_pending_operations_follow_the_checkpoint_after_its_outputs_were_read(
    backend: tuple[str, Path],
) -> None:
    """What the outputs' read saw of pending operations answers the question only for that very file: a
    checkpoint replaced since (as the engine replaces it, by a rename) is read again."""
    url, stacks = backend
    path = stacks / "s.json"
    path.write_text(_checkpoint())
    assert diy.checkpoint_outputs(url, "s", PROJECT) == {"plain": "v", "key": diy.SECRET_PLACEHOLDER}
    assert not diy.has_pending_operations(url, "s", PROJECT)
    fresh = stacks / "s.json.tmp"
    fresh.write_text(_checkpoint(pending=[{"resource": {"urn": "u"}, "type": "updating"}]))
    fresh.replace(path)
    assert diy.has_pending_operations(url, "s", PROJECT)
    assert diy.checkpoint_outputs(url, "s", PROJECT) is not None
    path.write_text(_checkpoint())  # rewritten in place: another size and time
    assert not diy.has_pending_operations(url, "s", PROJECT)


def test_tags_are_merged_into_a_version_1_file_only(backend: tuple[str, Path]) -> None:
    url, stacks = backend
    assert not diy.write_tags(url, PROJECT, "s", {"a": "1"})  # no such stack: the API decides
    (stacks / "s.json").write_text(_checkpoint())
    assert diy.write_tags(url, PROJECT, "s", {"b": "2"})
    tags_file = stacks / "s.pulumi-tags"
    assert json.loads(tags_file.read_text()) == {"version": 1, "tags": {"b": "2"}}
    (stacks / "s.pulumi-tags.attrs").write_text("{}")
    assert diy.write_tags(url, PROJECT, "s", {"a": "1"})
    assert json.loads(tags_file.read_text()) == {"version": 1, "tags": {"a": "1", "b": "2"}}
    assert not (stacks / "s.pulumi-tags.attrs").exists()  # it described the old content
    tags_file.write_text(json.dumps({"version": 2, "tags": {}}))
    assert not diy.write_tags(url, PROJECT, "s", {"c": "3"})
    assert json.loads(tags_file.read_text()) == {"version": 2, "tags": {}}


def test_an_s3_backend_is_read_only_with_a_plain_key_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "s3://state?endpoint=http://127.0.0.1:9000&region=eu-north1&s3ForcePathStyle=true"
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    assert diy.s3_bucket(url) is None  # no key: the engine (a profile, instance roles) decides
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-printed")
    bucket = diy.s3_bucket(url)
    assert bucket is not None
    assert (bucket.name, bucket.endpoint, bucket.client.region) == (
        "state",
        "http://127.0.0.1:9000",
        "eu-north1",
    )
    assert "not-printed" not in repr(bucket)
    assert diy.s3_bucket("file:///tmp/state") is None
    assert diy.s3_bucket("s3://state/prefix?region=eu-north1") is None  # a key prefix: not this layout
    assert diy.s3_bucket("s3://state?prefix=team/&region=eu-north1") is None
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    default = diy.s3_bucket("s3://state")
    assert default is not None and default.endpoint == "https://s3.us-west-2.amazonaws.com"
    monkeypatch.setenv("AWS_SESSION_TOKEN", "t")
    assert diy.s3_bucket(url) is None  # a session token would have to be signed too


def test_an_unreachable_s3_backend_means_ask_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    url = f"s3://state?endpoint=http://127.0.0.1:{port}&region=us-east-1"
    assert diy.checkpoint_outputs(url, "s", PROJECT) is diy.NO_FAST_PATH
    assert diy.read_locks(url, PROJECT, "s") == []
    assert not diy.interrupted(url, "s", PROJECT)


def test_stack_names_are_the_checkpoint_files_and_nothing_else(backend: tuple[str, Path]) -> None:
    url, stacks = backend
    for name in ("f.p.json", "f.p.json.attrs", "f.p.c1.json.gz", "f.p.json.bak", "f.p.c2.json.bak"):
        (stacks / name).write_text("{}")
    (stacks / ".f.p.json.123.tmp").write_text("")
    assert diy.stack_names(url, PROJECT) == ["f.p", "f.p.c1"]  # a removed stack leaves only its .bak
    (stacks / "f.p.c3.json.zst").write_text("")
    assert diy.stack_names(url, PROJECT) is None  # a compression it does not read: ask the engine
    assert diy.stack_names("s3://bucket", PROJECT) is None


def test_the_last_update_is_the_newest_history_entry(backend: tuple[str, Path]) -> None:
    url, _stacks = backend
    history = Path(url.removeprefix("file://")) / ".pulumi" / "history" / PROJECT / "f.p"
    assert diy.last_update_result(url, "f.p", PROJECT) is None  # no history at all
    history.mkdir(parents=True)
    # Entries are ordered by their nanosecond stamp, not by name; checkpoints and attrs are not entries.
    (history / "f.p-999.history.json").write_text(json.dumps({"kind": "update", "result": "succeeded"}))
    (history / "f.p-1000.history.json").write_text(json.dumps({"kind": "update", "result": "failed"}))
    (history / "f.p-1001.checkpoint.json").write_text("{}")
    (history / "f.p-1000.history.json.attrs").write_text("{}")
    assert diy.last_update_result(url, "f.p", PROJECT) == "failed"
    (history / "f.p-1002.history.json").write_text("not json")
    assert diy.last_update_result(url, "f.p", PROJECT) is diy.NO_FAST_PATH  # unreadable: ask the engine
    assert diy.last_update_result("s3://b/prefix", "f.p", PROJECT) is diy.NO_FAST_PATH
