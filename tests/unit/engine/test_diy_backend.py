"""The one module that reads and writes the engine's private DIY files (engine.diy_backend) understands
exactly the format versions of the pinned engine, and answers "ask the engine" for anything else.
tests/integration/test_diy_backend_formats.py checks that the pinned engine writes these versions."""

from __future__ import annotations

import hashlib
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


class _Objects:
    """An S3 client's `request` over a dict of objects, answering as an S3 server does to a GET (200 with
    the object's ETag, 304 to a matching If-None-Match, 404), and recording what it was asked."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.asked: list[tuple[str, str | None, int]] = []  # (key, If-None-Match, status)

    def request(self, method: str, bucket: str, key: str = "", **kwargs: object) -> object:
        from npa_pulumi.cloud.nebius.s3 import S3Response

        assert method == "GET"
        conditions = kwargs.get("conditions") or {}
        assert isinstance(conditions, dict)
        if key not in self.objects:
            answer = S3Response(404, b"<Error><Code>NoSuchKey</Code></Error>")
        else:
            etag = '"' + hashlib.md5(self.objects[key]).hexdigest() + '"'
            matched = conditions.get("If-None-Match") == etag
            answer = S3Response(
                304 if matched else 200, b"" if matched else self.objects[key], {"ETag": etag}
            )
        self.asked.append((key, conditions.get("If-None-Match"), answer.status))
        return answer


@pytest.fixture
def s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[diy.S3Bucket, _Objects]:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "npa-home"))
    objects = _Objects()
    objects.objects[".pulumi/meta.yaml"] = b"version: 1\n"
    return diy.S3Bucket(objects, "state", "http://127.0.0.1:1"), objects  # type: ignore[arg-type]


def test_an_s3_read_is_asked_again_only_whether_the_object_changed(
    s3: tuple[diy.S3Bucket, _Objects], tmp_path: Path
) -> None:
    bucket, objects = s3
    key = f".pulumi/stacks/{PROJECT}/s.json"
    objects.objects[key] = _checkpoint().encode()
    assert diy._s3_latest_deployment(bucket, "s", PROJECT)["resources"][0]["outputs"] == {
        "plain": "v",
        "key": diy.SECRET_PLACEHOLDER,
    }
    assert objects.asked[-1] == (key, None, 200)
    # The same object again: a conditional GET, answered 304, gives the same reading.
    assert diy._s3_latest_deployment(bucket, "s", PROJECT)["resources"][0]["outputs"]["plain"] == "v"
    assert list(objects.asked[-1][1:]) == ['"' + hashlib.md5(objects.objects[key]).hexdigest() + '"', 304]
    # Changed (an update wrote pending operations): read again, whole.
    objects.objects[key] = _checkpoint(pending=[{"type": "creating"}]).encode()
    assert diy._s3_latest_deployment(bucket, "s", PROJECT)["pending_operations"] is True
    assert objects.asked[-1][2] == 200
    # What is kept is private and holds no ciphertext.
    kept = list((tmp_path / "npa-home" / "s3-reads").rglob("*.json"))
    assert len(kept) == 1 and kept[0].stat().st_mode & 0o777 == 0o600
    assert b"ciphertext" not in kept[0].read_bytes() and diy.SECRET_SIG not in kept[0].read_text()
    # Gone: no such stack; a checkpoint of another version: ask the engine, and nothing is kept for it.
    del objects.objects[key]
    assert diy._s3_latest_deployment(bucket, "s", PROJECT) is None
    objects.objects[key] = _checkpoint(version=4).encode()
    assert diy._s3_latest_deployment(bucket, "s", PROJECT) is diy.NO_FAST_PATH
    assert diy._s3_latest_deployment(bucket, "s", PROJECT) is diy.NO_FAST_PATH
    assert objects.asked[-1][1:] != (None, 304)


def test_the_cached_reading_of_a_checkpoint_answers_as_the_whole_checkpoint(
    s3: tuple[diy.S3Bucket, _Objects], backend: tuple[str, Path]
) -> None:
    """What the s3 reads keep of a checkpoint gives every reader the same answers as the file itself."""
    bucket, objects = s3
    url, stacks = backend
    document = json.loads(_checkpoint(pending=[{"type": "updating"}]))
    document["checkpoint"]["latest"]["secrets_providers"] = {
        "type": "passphrase",
        "state": {"salt": "v1:abc"},
    }
    (stacks / "s.json").write_text(json.dumps(document))
    objects.objects[f".pulumi/stacks/{PROJECT}/s.json"] = json.dumps(document).encode()
    whole, kept = diy._latest_deployment(url, "s", PROJECT), diy._s3_latest_deployment(bucket, "s", PROJECT)
    assert kept == diy._s3_latest_deployment(bucket, "s", PROJECT)  # and again from the cache (304)
    for read in (whole, kept):
        assert isinstance(read, dict)
    assert diy.checkpoint_outputs(url, "s", PROJECT) == {"plain": "v", "key": diy.SECRET_PLACEHOLDER}
    assert diy._mask_secrets(kept["resources"][0]["outputs"]) == {"plain": "v", "key": diy.SECRET_PLACEHOLDER}
    assert bool(whole.get("pending_operations")) == bool(kept.get("pending_operations")) is True
    assert kept["secrets_providers"] == {"type": "passphrase", "state": {"salt": "v1:abc"}}
    assert diy._latest_read({"version": 3, "checkpoint": {}}) == {}  # before the first update


def test_a_history_entry_is_read_once(s3: tuple[diy.S3Bucket, _Objects]) -> None:
    bucket, objects = s3
    key = f".pulumi/history/{PROJECT}/s/s-1000.history.json"
    objects.objects[key] = json.dumps({"kind": "update", "result": "failed"}).encode()

    def result() -> object:
        return bucket.read(key, lambda raw: diy._history_result(raw, False), immutable=True)

    assert result() == "failed"
    assert result() == "failed"
    assert [k for k, _, _ in objects.asked] == [key]  # written once under its own name: never asked again
