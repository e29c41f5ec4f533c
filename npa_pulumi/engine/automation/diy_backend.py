"""The one module that reads and writes the Pulumi engine's own files in a DIY (file://) backend.

Everything else goes through the Automation API or the CLI's documented commands. These shortcuts stay
because each spares engine starts that were measured to matter, and each is checked against the format
version it understands, falling back to the API for anything else (another backend, another layout, a
newer version). The versions below are those of the pinned engine (pulumi v3.259, pkg/backend/diy);
tests/unit/engine/test_diy_backend.py pins them, and an integration test checks that the engine writes them.

* `checkpoint_outputs` (stack outputs from `<stack>.json`): the CLI path is three engine invocations per
  stack (`stack select`, `stack output` twice, about 1.5 s of CPU), which dominated a no-op `up` of a
  large fleet.
* `write_tags` (`<stack>.pulumi-tags`): `pulumi stack tag set` is one engine start (~0.35 s of CPU) per
  tag, four per new cluster stack: about a third of the CPU a first deploy of a fleet spent on two cores.
* `read_tags` (`<stack>.pulumi-tags`): the lifecycle state recorded beside each stack, which `status` reads
  for every stack: `pulumi stack tag ls` is an engine start per stack.
* `read_locks` (`.pulumi/locks/...`): the engine offers no way to ask who holds a stack's lock; the
  owner's pid, host and time decide whether a lock is stale (then `pulumi cancel` removes it).
* `last_update_result` (the newest `.pulumi/history/<project>/<stack>/<stack>-<ns>.history.json`): whether
  the stack's last update failed, which `status` asks of every deployed stack; `pulumi stack history`
  is an engine start that also derives the passphrase key (`--show-secrets`), ~0.5 s of CPU per stack.
* `has_pending_operations` / `interrupted`: whether a killed update left the stack locked or with pending
  operations, without an engine start per stack on every `up`.

On an `s3://` backend (the same layout in a bucket) the checkpoints (outputs, pending operations), the tags
and the locks are read through the S3 API with the operator's exported key (AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY, the key the engine uses): one GET per stack instead of engine starts (what `status`
and a no-op `up` of a large fleet spend), and a run killed after its update wrote the outputs leaves a lock
there too, which the no-op check of `up` (outputs match, stack skipped) must see, as it does on file://.
Without such a key in the environment (an AWS profile, a session token), or on any answer but the object
or 404, the engine is asked, as before; tags are always set through the engine there.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import re
import socket
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson
from pydantic import SecretStr

from npa_pulumi.cloud.aws_credentials import from_environment
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import npa_home
from npa_pulumi.runtime.processes import parse_timestamp, process_alive

if TYPE_CHECKING:
    from npa_pulumi.cloud.nebius.s3 import S3Client

# Format versions this module understands (pinned engine: backend/diy/{meta,stack_tags}.go,
# apitype.DeploymentSchemaVersionCurrent).
META_VERSION: Final = 1  # `.pulumi/meta.yaml` `version: 1`: project-scoped stacks
TAGS_VERSION: Final = 1  # `<stack>.pulumi-tags`: {"version": 1, "tags": {...}}
CHECKPOINT_VERSION: Final = 3  # `<stack>.json`: {"version": 3, "checkpoint": {"latest": {...}}}

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker of a secret value in a checkpoint
SECRET_PLACEHOLDER = "[secret]"
NO_FAST_PATH = object()  # "ask the engine": not a DIY backend, or not a layout this module knows


def diy_root(backend_url: str) -> Path | None:
    if not backend_url.startswith("file://"):
        return None
    # The engine's URL is absolute already (workspace.resolve_backend_url); a query is not part of the path.
    return Path(os.path.expanduser(backend_url[len("file://") :].partition("?")[0]))


# Backend roots whose `.pulumi/meta.yaml` showed the layout this module knows, read once a process: a
# fleet-wide read asks for every stack's files (three times per stack for `status`), and the engine never
# moves a backend off a layout (an older one is upgraded only by `pulumi state upgrade`, not mid-command).
_KNOWN_LAYOUT: set[Path] = set()


def stacks_dir(backend_url: str, project_name: str) -> Path | None:
    """Where a project-scoped DIY (file://) backend keeps this project's checkpoints; None for any other
    backend, or a layout this module does not know (legacy or future), so callers ask the CLI instead."""
    root = diy_root(backend_url)
    if root is None:
        return None
    if root in _KNOWN_LAYOUT:
        return root / ".pulumi" / "stacks" / project_name
    try:
        meta = (root / ".pulumi" / "meta.yaml").read_text()
    except FileNotFoundError:
        # A backend no stack was ever written to: the engine will create the current layout in it.
        return None if (root / ".pulumi").exists() else root / ".pulumi" / "stacks" / project_name
    except OSError:
        return None
    if not any(line.strip() == f"version: {META_VERSION}" for line in meta.splitlines()):
        return None
    _KNOWN_LAYOUT.add(root)
    return root / ".pulumi" / "stacks" / project_name


def stack_names(backend_url: str, project_name: str) -> list[str] | None:
    """The project's stacks on a DIY (file://) backend, from its checkpoint files (what `pulumi stack ls`
    reads, without an engine start), or on an s3:// one readable from here, from a listing of its keys
    (the engine's `stack ls` reads every stack's checkpoint: minutes for 10,000 stacks); None for another
    backend, or a file this module does not know."""
    bucket = s3_bucket(backend_url)
    if bucket is not None:
        prefix = f".pulumi/stacks/{project_name}/"
        try:
            if not bucket.layout_known():
                return None
            keys = bucket.keys(prefix, every_page=True)
        except S3Unreadable:
            return None
        return _stack_names_of([key[len(prefix) :] for key in keys if key.startswith(prefix)])
    directory = stacks_dir(backend_url, project_name)
    if directory is None:
        return None
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError:
        return None
    return _stack_names_of(entries)


def _stack_names_of(entries: list[str]) -> list[str] | None:
    """The stack names among a project's checkpoint directory's entries; None for a layout not known."""
    names = []
    for name in entries:
        if "/" in name:
            return None  # a folder in the project's checkpoints: not the layout this module knows
        if name.startswith(".") or ".json.bak" in name or name.endswith((".attrs", ".pulumi-tags")):
            continue  # temp files, backups, the blob store's attributes files, tags
        if name.endswith(".json"):
            names.append(name.removesuffix(".json"))
        elif name.endswith(".json.gz"):
            names.append(name.removesuffix(".json.gz"))
        else:
            return None  # another compression or layout: ask the CLI
    return sorted(set(names))


# ------------------------------------------------------------------------------------------- tags


def read_tags(backend_url: str, project_name: str, stack: str) -> Any:
    """A stack's tags from its tags file on a file:// backend, or an s3:// one readable from here ({} when
    it has none); None when the stack does not exist; `NO_FAST_PATH` when the caller must ask the engine
    (another backend, layout or version, an unreadable file)."""
    bucket = s3_bucket(backend_url)
    if bucket is not None:
        return _s3_read_tags(bucket, project_name, stack)
    directory = stacks_dir(backend_url, project_name)
    if directory is None:
        return NO_FAST_PATH
    if not (directory / f"{stack}.json").is_file() and not (directory / f"{stack}.json.gz").is_file():
        return None
    path = directory / f"{stack}.pulumi-tags"
    if not path.exists():
        return {}
    try:
        return _tags_of(path.read_bytes())
    except OSError:
        return NO_FAST_PATH


def _tags_of(raw: bytes) -> Any:
    try:
        document = json.loads(raw)
    except ValueError:
        return NO_FAST_PATH
    if not isinstance(document, dict) or document.get("version") != TAGS_VERSION:
        return NO_FAST_PATH
    return {str(k): str(v) for k, v in (document.get("tags") or {}).items()}


def _s3_read_tags(bucket: S3Bucket, project_name: str, stack: str) -> Any:
    """`read_tags` in an s3:// backend: the tags object beside the checkpoint (the same layout), one GET
    per stack instead of an engine start (`status` reads every stack's lifecycle tags)."""
    base = f".pulumi/stacks/{project_name}/{stack}"
    try:
        if not bucket.layout_known():
            return NO_FAST_PATH
        tags = bucket.read(f"{base}.pulumi-tags", _tags_of)
        if tags is not None:
            return tags
        return {} if bucket.exists(f"{base}.json") or bucket.exists(f"{base}.json.gz") else None
    except S3Unreadable:
        return NO_FAST_PATH


def write_tags(
    backend_url: str, project_name: str, stack: str, tags: dict[str, str], remove: tuple[str, ...] = ()
) -> bool:
    """Set tags (and remove the tags named in `remove`) on a file:// backend by writing the stack's tags
    file as the engine does, merged with the tags already there. Returns False, writing nothing, when that
    is not possible (another backend or layout, no such stack, a tags file of another version): the
    caller then uses the API."""
    directory = stacks_dir(backend_url, project_name)
    if directory is None or not (directory / f"{stack}.json").is_file():
        return False
    path = directory / f"{stack}.pulumi-tags"
    current: dict[str, str] = {}
    if path.exists():
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        if not isinstance(document, dict) or document.get("version") != TAGS_VERSION:
            return False
        current = {str(k): str(v) for k, v in (document.get("tags") or {}).items()}
    merged = {k: v for k, v in {**current, **tags}.items() if k not in remove}
    if merged == current:
        return True
    # The blob store's attributes sidecar (content type, md5) describes the old content; it is optional.
    path.with_name(path.name + ".attrs").unlink(missing_ok=True)
    write_atomically(path, json.dumps({"version": TAGS_VERSION, "tags": dict(sorted(merged.items()))}))
    return True


# ------------------------------------------------------------------------------------ checkpoints


def _mask_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return SECRET_PLACEHOLDER
        return {k: _mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_secrets(v) for v in value]
    return value


def _latest_deployment(backend_url: str, stack: str, project_name: str) -> Any:
    """The `checkpoint.latest` of a stack on a project-scoped DIY backend ({} before its first update);
    None when the stack does not exist; `NO_FAST_PATH` for another backend, an unreadable file or another
    checkpoint version. The DIY backend writes checkpoints atomically (temp file + rename; an S3 object is
    replaced whole), so a concurrent update never shows a torn file."""
    bucket = s3_bucket(backend_url)
    if bucket is not None:
        return _s3_latest_deployment(bucket, stack, project_name)
    directory = stacks_dir(backend_url, project_name)
    if directory is None:
        return NO_FAST_PATH
    base = directory / f"{stack}.json"
    try:
        with base.open("rb") as handle:
            identity = _identity(os.fstat(handle.fileno()))
            document = _checkpoint_document(handle.read(), gzipped=False)
        if isinstance(document, dict):
            latest = (document.get("checkpoint") or {}).get("latest") or {}
            _PENDING[base] = (identity, isinstance(latest, dict) and bool(latest.get("pending_operations")))
    except FileNotFoundError:
        try:
            document = _checkpoint_document(base.with_suffix(".json.gz").read_bytes(), gzipped=True)
        except FileNotFoundError:
            return None
        except OSError:
            return NO_FAST_PATH
    except OSError:  # a directory of that name, no access
        return NO_FAST_PATH
    if not isinstance(document, dict) or document.get("version") != CHECKPOINT_VERSION:
        return NO_FAST_PATH
    return (document.get("checkpoint") or {}).get("latest") or {}


def _checkpoint_document(raw: bytes, gzipped: bool) -> Any:
    """The parsed document (None when it is not JSON). orjson: a cluster stack's checkpoint is ~35 KB, and
    a fleet-wide read of 10,000 stacks parses 350 MB of them (the standard library's parser takes half as
    long again)."""
    try:
        text = gzip.decompress(raw) if gzipped else raw
    except OSError:
        return None
    try:
        return orjson.loads(text)
    except ValueError:  # not JSON, or what orjson refuses and JSON allows (an integer beyond 64 bits)
        pass
    try:
        return json.loads(text)
    except ValueError:
        return None


def _s3_latest_deployment(bucket: S3Bucket, stack: str, project_name: str) -> Any:
    """`_latest_deployment` in an s3:// backend: the same layout as file://, read with GETs (one or two
    per stack instead of two or three engine starts). Anything but 200 or 404 means: ask the engine."""
    try:
        if not bucket.layout_known():
            return NO_FAST_PATH
        for suffix in (".json", ".json.gz"):
            read = _gzipped_latest_read if suffix.endswith(".gz") else _plain_latest_read
            latest = bucket.read(f".pulumi/stacks/{project_name}/{stack}{suffix}", read)
            if latest is not None:
                return latest
    except S3Unreadable:
        return NO_FAST_PATH
    return None


def _latest_read(document: Any) -> Any:
    """The parts of a checkpoint's `checkpoint.latest` this module reads (the root stack's outputs, secrets
    masked; the passphrase provider's salt; whether operations are pending), which the s3 read cache
    keeps; NO_FAST_PATH for a checkpoint of another version."""
    if not isinstance(document, dict) or document.get("version") != CHECKPOINT_VERSION:
        return NO_FAST_PATH
    latest = (document.get("checkpoint") or {}).get("latest") or {}
    if not isinstance(latest, dict):
        return NO_FAST_PATH
    read: dict[str, Any] = {}
    for resource in latest.get("resources") or []:
        if resource.get("type") == "pulumi:pulumi:Stack" and not resource.get("parent"):
            outputs = _mask_secrets(dict(resource.get("outputs") or {}))
            read["resources"] = [{"type": "pulumi:pulumi:Stack", "outputs": outputs}]
            break
    providers = latest.get("secrets_providers")
    if isinstance(providers, dict) and providers.get("type") == "passphrase":
        salt = (providers.get("state") or {}).get("salt")
        read["secrets_providers"] = {"type": "passphrase", "state": {"salt": salt}}
    if latest.get("pending_operations"):
        read["pending_operations"] = True
    return read


def _plain_latest_read(raw: bytes) -> Any:
    return _latest_read(_checkpoint_document(raw, gzipped=False))


def _gzipped_latest_read(raw: bytes) -> Any:
    return _latest_read(_checkpoint_document(raw, gzipped=True))


def checkpoint_outputs(backend_url: str, stack: str, project_name: str) -> Any:
    """A stack's outputs read straight from its checkpoint, secrets masked as `[secret]`; None when the
    stack does not exist; `NO_FAST_PATH` when the caller must ask the engine instead."""
    latest = _latest_deployment(backend_url, stack, project_name)
    if latest is None or latest is NO_FAST_PATH:
        return latest
    for resource in latest.get("resources") or []:
        if resource.get("type") == "pulumi:pulumi:Stack" and not resource.get("parent"):
            return _mask_secrets(dict(resource.get("outputs") or {}))
    return {}


def passphrase_salt(backend_url: str, stack: str, project_name: str) -> str | None:
    """The passphrase secrets provider's salt of a stack (its `encryptionsalt`: the salt and a check value
    encrypted with the key, not secret), from its checkpoint; None for a stack with another provider, or
    when the checkpoint cannot be read here."""
    latest = _latest_deployment(backend_url, stack, project_name)
    if not isinstance(latest, dict):
        return None
    providers = latest.get("secrets_providers") or {}
    if not isinstance(providers, dict) or providers.get("type") != "passphrase":
        return None
    salt = (providers.get("state") or {}).get("salt")
    return salt if isinstance(salt, str) and salt.startswith("v1:") else None


# ---------------------------------------------------------------------------------------- history


_HISTORY_SUFFIXES = (".history.json", ".history.json.gz")


def _newest_history(names: list[str], stack: str) -> str | None:
    """The newest of a stack's history entries (`<stack>-<unix ns>.history.json[.gz]`) by its timestamp."""
    newest: tuple[int, str] | None = None
    for name in names:
        base = name.rsplit("/", 1)[-1]
        suffix = next((s for s in _HISTORY_SUFFIXES if base.endswith(s)), None)
        if suffix is None or not base.startswith(f"{stack}-"):
            continue
        stamp = base[len(stack) + 1 : -len(suffix)]
        if stamp.isdigit() and (newest is None or int(stamp) > newest[0]):
            newest = (int(stamp), name)
    return newest[1] if newest else None


def _history_result(raw: bytes, gzipped: bool) -> Any:
    document = _checkpoint_document(raw, gzipped)
    if not isinstance(document, dict) or not isinstance(document.get("result"), str):
        return NO_FAST_PATH
    return document["result"]


def last_update_result(backend_url: str, stack: str, project_name: str) -> Any:
    """The result of the stack's newest update (`succeeded`, `failed`, `in-progress`) from its history
    entries on a file:// (or readable s3://) backend; None when it has none; `NO_FAST_PATH` when the caller
    must ask the engine (another backend or layout, an unreadable entry)."""
    relative = f".pulumi/history/{project_name}/{stack}/"
    bucket = s3_bucket(backend_url)
    if bucket is not None:
        try:
            if not bucket.layout_known():
                return NO_FAST_PATH
            key = _newest_history(bucket.keys(relative, every_page=True), stack)
            if key is None:
                return None
            gzipped = key.endswith(".gz")
            # An entry is written once under a name of its own (the update's time to the nanosecond).
            return bucket.read(key, lambda raw: _history_result(raw, gzipped), immutable=True)
        except S3Unreadable:
            return NO_FAST_PATH
    if stacks_dir(backend_url, project_name) is None:
        return NO_FAST_PATH
    directory = (diy_root(backend_url) or Path()) / relative
    try:
        newest = _newest_history(os.listdir(directory), stack)
        raw = (directory / newest).read_bytes() if newest is not None else None
    except FileNotFoundError:
        return None
    except OSError:
        return NO_FAST_PATH
    return None if raw is None else _history_result(raw, str(newest).endswith(".gz"))


# Whether a file:// checkpoint, as last read (its inode, size and time: the engine replaces a checkpoint by
# renaming a new file over it), had pending operations: a fleet-wide check reads every stack's outputs and
# then asks this of each, and a cluster stack's checkpoint is ~35 KB to parse again.
_PENDING: dict[Path, tuple[tuple[int, int, int], bool]] = {}


def _identity(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def has_pending_operations(backend_url: str, stack: str, project_name: str) -> bool:
    directory = stacks_dir(backend_url, project_name)  # file:// only
    if directory is not None:
        path = directory / f"{stack}.json"
        try:
            identity = _identity(path.stat())
        except OSError:
            identity = None
        known = _PENDING.get(path)
        if known is not None and known[0] == identity:
            return known[1]
    latest = _latest_deployment(backend_url, stack, project_name)
    return isinstance(latest, dict) and bool(latest.get("pending_operations"))


# ------------------------------------------------------------------------------------ s3 backends


_S3_KEY = re.compile(r"<Key>([^<]*)</Key>")
_S3_TOKEN = re.compile(r"<NextContinuationToken>([^<]*)</NextContinuationToken>")


class S3Unreadable(Exception):
    """The bucket answered neither with the object nor with 404 (no access, no network)."""


_LAYOUTS: dict[tuple[str, str], bool] = {}  # (endpoint, bucket) -> meta.yaml is a version this module knows


@dataclass(frozen=True)
class S3Bucket:
    """Reading the engine's objects in the bucket of an s3:// backend (path-style, signed requests)."""

    client: S3Client
    name: str
    endpoint: str

    def get(self, key: str) -> bytes | None:
        """The object's bytes; None when there is no such key; S3Unreadable otherwise."""
        try:
            response = self.client.request("GET", self.name, key)
        except OSError as err:
            raise S3Unreadable(str(err)) from None
        if response.status == 404:
            return None
        if response.status != 200:
            raise S3Unreadable(f"HTTP {response.status}")
        return response.body

    def read(self, key: str, derive: Callable[[bytes], Any], immutable: bool = False) -> Any:
        """What `derive` makes of the object's bytes; None when there is no such key; S3Unreadable
        otherwise. What it made of the same content before comes from this machine's read cache (a
        conditional GET: the server answers 304, without the body, while the object's ETag is the one
        cached; an `immutable` object, a history entry, is not asked again at all). A NO_FAST_PATH from
        `derive` is not kept."""
        cached = _read_cache(self, key)
        if cached is not None and immutable:
            return cached[1]
        conditions = {"If-None-Match": cached[0]} if cached is not None else None
        try:
            response = self.client.request("GET", self.name, key, conditions=conditions)
        except OSError as err:
            raise S3Unreadable(str(err)) from None
        if response.status == 304 and cached is not None:
            return cached[1]
        if response.status == 404:
            return None
        if response.status != 200:
            raise S3Unreadable(f"HTTP {response.status}")
        value = derive(response.body)
        etag = next((v for k, v in response.headers.items() if k.lower() == "etag"), "")
        if etag and value is not NO_FAST_PATH:
            _keep_read(self, key, etag, value)
        return value

    def exists(self, key: str) -> bool:
        """Whether the object exists (a HEAD); S3Unreadable for any answer but 200 or 404."""
        try:
            response = self.client.request("HEAD", self.name, key)
        except OSError as err:
            raise S3Unreadable(str(err)) from None
        if response.status not in (200, 404):
            raise S3Unreadable(f"HTTP {response.status}")
        return response.status == 200

    def layout_known(self) -> bool:
        """Whether the backend's `.pulumi/meta.yaml` is the project-scoped layout (read once a process)."""
        where = (self.endpoint, self.name)
        if where not in _LAYOUTS:
            meta = self.get(".pulumi/meta.yaml")
            lines = (meta or b"").decode("utf-8", "replace").splitlines()
            _LAYOUTS[where] = any(line.strip() == f"version: {META_VERSION}" for line in lines)
        return _LAYOUTS[where]

    def keys(self, prefix: str, every_page: bool = False) -> list[str]:
        """The keys under `prefix`: the first page (a stack has a lock or two, never a thousand; none when
        the listing fails: the engine then names a holder when it refuses the lock), or with `every_page`
        all of them (a stack's history grows by two entries per update), S3Unreadable when that fails."""
        found: list[str] = []
        token = ""
        while True:
            params = {"list-type": "2", "prefix": prefix, **({"continuation-token": token} if token else {})}
            query = urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
            try:
                response = self.client.request("GET", self.name, query=query)
            except OSError as err:
                if every_page:
                    raise S3Unreadable(str(err)) from None
                return []
            if response.status != 200:
                if every_page:
                    raise S3Unreadable(f"HTTP {response.status}")
                return []
            text = response.body.decode("utf-8", "replace")
            found += [_xml_unescape(key) for key in _S3_KEY.findall(text)]
            truncated = every_page and "<IsTruncated>true</IsTruncated>" in text
            more = _S3_TOKEN.search(text) if truncated else None
            if more is None:
                return found
            token = _xml_unescape(more.group(1))


# ---------------------------------------------------------------------------- the s3 read cache
# What was made of an s3:// backend's objects (a checkpoint's outputs, a stack's tags, a history entry's
# result), kept on this machine with the object's ETag: an unchanged fleet's next read asks the server
# only whether each object changed (304, no body: about a third of a GET's cost to a SeaweedFS server
# for a cluster stack's ~50 KB checkpoint, and no parse here). One file per object, private (0600):
# outputs are kept as read (secrets already masked), a checkpoint's other parts not at all.

READ_CACHE_VERSION: Final = 1


def _read_cache_path(bucket: S3Bucket, key: str) -> Path:
    where = hashlib.sha256(f"{bucket.endpoint}\0{bucket.name}".encode()).hexdigest()[:16]
    name = hashlib.sha256(key.encode()).hexdigest()[:40]
    return npa_home() / "s3-reads" / f"v{READ_CACHE_VERSION}" / where / f"{name}.json"


def _read_cache(bucket: S3Bucket, key: str) -> tuple[str, Any] | None:
    """(ETag, value) kept for this object; None when none (or an unreadable or foreign entry)."""
    try:
        entry = orjson.loads(_read_cache_path(bucket, key).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("etag"), str):
        return None
    return entry["etag"], entry.get("value")


def _keep_read(bucket: S3Bucket, key: str, etag: str, value: Any) -> None:
    """Best effort: a cache that cannot be written only costs the next read its body. Written whole under
    a temp name and renamed (a reader never sees half of it), private from its creation; the folder made
    once a process (a fleet's first read keeps three objects per stack)."""
    path = _read_cache_path(bucket, key)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        if path.parent not in _READ_CACHE_DIRS:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _READ_CACHE_DIRS.add(path.parent)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(orjson.dumps({"key": key, "etag": etag, "value": value}))
        os.replace(tmp, path)
    except (OSError, TypeError):
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


_READ_CACHE_DIRS: set[Path] = set()


def _xml_unescape(text: str) -> str:
    for escaped, plain in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&apos;", "'"), ("&amp;", "&")):
        text = text.replace(escaped, plain)
    return text


def s3_bucket(backend_url: str, credentials: tuple[str, SecretStr] | None = None) -> S3Bucket | None:
    """The bucket of an `s3://BUCKET?endpoint=…&region=…` backend, readable with `credentials`, else the
    access key in the environment (the variables, or a shared-credentials profile: aws_credentials.py);
    None for another backend, a URL with a key prefix, or no usable key here."""
    if not backend_url.startswith("s3://"):
        return None
    parsed = urllib.parse.urlsplit(backend_url)
    query = dict(urllib.parse.parse_qsl(parsed.query))
    if not parsed.netloc or parsed.path.strip("/") or query.get("prefix"):
        return None
    # A session token would have to be signed too; the S3 client here signs with a plain key only.
    credentials = credentials or from_environment()
    if credentials is None:
        return None
    key, secret = credentials
    region = query.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    region = region or "us-east-1"
    endpoint = query.get("endpoint") or f"https://s3.{region}.amazonaws.com"
    if "://" not in endpoint:
        endpoint = "https://" + endpoint
    # One bucket (and its client's open connections) per endpoint, bucket and key for the process: a
    # fleet-wide read asks for it several times per stack. The key is looked up each time (a run's minted
    # key replaces the one in the environment: state_key.py).
    where = (endpoint, region, parsed.netloc, key, secret)
    with _BUCKETS_LOCK:
        known = _BUCKETS.get(where)
    if known is not None:
        return known
    # Imported here: the S3 client loads ssl and urllib.request, which a file:// backend never needs.
    from npa_pulumi.cloud.nebius.s3 import S3Client

    try:
        client = S3Client(endpoint, region, key, secret, timeout_s=15.0)
    except ValueError:
        return None
    with _BUCKETS_LOCK:
        return _BUCKETS.setdefault(where, S3Bucket(client, parsed.netloc, endpoint))


# Keyed by the secret too (SecretStr compares and hashes by its value, and never shows it).
_BUCKETS: dict[tuple[str, str, str, str, SecretStr], S3Bucket] = {}
_BUCKETS_LOCK = threading.Lock()


# ------------------------------------------------------------------------------------------ locks


@dataclass(frozen=True)
class LockInfo:
    """A stack lock file: `{"pid", "username", "hostname", "timestamp"}` (backend/diy/lock.go)."""

    location: str  # the lock file's path, its key in the bucket, or the URL the engine's refusal names
    pid: int
    hostname: str
    username: str
    timestamp: str

    @property
    def owner_alive(self) -> bool:
        """Whether the engine that took the lock still runs (runtime.processes: a zombie, or a pid reused
        since the lock was taken, is not it; another host's lock is assumed live)."""
        return process_alive(self.pid, hostname=self.hostname, since=parse_timestamp(self.timestamp))

    @property
    def local(self) -> bool:
        return self.hostname == socket.gethostname()

    def describe(self) -> str:
        return f"pid {self.pid} on {self.hostname}, user {self.username}, since {self.timestamp}"


def _lock(location: str, raw: bytes | str) -> LockInfo | None:
    try:
        data = json.loads(raw)
        return LockInfo(
            location,
            int(data.get("pid", 0)),
            str(data.get("hostname", "")),
            str(data.get("username", "")),
            str(data.get("timestamp", "")),
        )
    except (ValueError, TypeError, AttributeError):
        return None  # torn or foreign: the engine still refuses it, naming what it can


def read_locks(backend_url: str, project_name: str, stack: str) -> list[LockInfo]:
    """The stack's engine locks in a file:// backend, or in an s3:// one readable from here (a lock
    released between listing and reading is gone, so skipped)."""
    relative = f".pulumi/locks/organization/{project_name}/{stack}/"
    bucket = s3_bucket(backend_url)
    if bucket is not None:
        found = []
        for key in bucket.keys(relative):
            try:
                raw = bucket.get(key) if key.endswith(".json") else None
            except S3Unreadable:
                continue
            lock = _lock(key, raw) if raw is not None else None
            if lock is not None:
                found.append(lock)
        return found
    root = diy_root(backend_url)
    if root is None:
        return []
    lock_dir = root / relative
    if not lock_dir.is_dir():
        return []
    locks = []
    for path in sorted(lock_dir.glob("*.json")):
        try:
            lock = _lock(str(path), path.read_text())
        except OSError:
            continue
        if lock is not None:
            locks.append(lock)
    return locks


def remove_locks(backend_url: str, locks: list[LockInfo]) -> None:
    """Delete these locks (read by `read_locks` from the same backend) without the engine: `pulumi cancel`
    needs the stack to exist, and a run killed while it created a stack leaves the lock of one that does
    not. S3Unreadable when the bucket refuses a delete."""
    bucket = s3_bucket(backend_url)
    for lock in locks:
        if bucket is None:
            Path(lock.location).unlink(missing_ok=True)
            continue
        try:
            response = bucket.client.request("DELETE", bucket.name, lock.location)
        except OSError as err:
            raise S3Unreadable(str(err)) from None
        if response.status not in (200, 204, 404):
            raise S3Unreadable(f"HTTP {response.status}")


def interrupted(backend_url: str, stack: str, project_name: str) -> bool:
    """Whether the backend (file://, or s3:// readable from here) shows the stack locked or with pending
    operations: an update was killed (or is running) after it may already have written its outputs, so
    the stack must not be skipped as unchanged; running it recovers the lock (or reports who holds it)."""
    return bool(read_locks(backend_url, project_name, stack)) or has_pending_operations(
        backend_url, stack, project_name
    )
