"""Redaction: what of a cloud's ids and credentials may be shown, in one place for every rendering.

* `mask_id`: a live resource id that must never be published in full (capacity block groups) keeps its
  type prefix and at most four characters of the id;
* `scrub`: any text (reports, the pull-request comment, the HTML page, error tails) with capacity-block
  ids masked and anything that looks like a credential blanked (private keys, JWTs, bearer tokens, AWS
  access key ids, `NAME=value` and `"name": "value"` where the name says secret, Pulumi's secret values);
* `replace_secrets`: text with the known run-time secrets of one run (the IAM token, capacity-block ids)
  replaced, as `terraform.log` and terraform's error tails are;
* `mask_secrets`: a JSON value (a Terraform plan summary) with every string that holds a known secret
  replaced by `(sensitive)`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

SENSITIVE = "(sensitive)"
_SUFFIX = 4


def mask_id(resource_id: str) -> str:
    """`capacityblockgroup-e00abcdef1234a1b2` → `capacityblockgroup-…a1b2`.

    The resource-type prefix stays so a reader knows what the id is; at most four characters (and never more
    than half of the unique part) of the id itself are shown, enough to tell two blocks apart in one report.
    """
    head, sep, tail = resource_id.strip().partition("-")
    if not sep or not tail:
        # No type prefix to keep (or nothing after it): show only the masked id itself.
        head, sep, tail = "", "", resource_id.strip()
    shown = min(_SUFFIX, len(tail) // 2)
    return f"{head}{sep}…{tail[-shown:] if shown else ''}"


_CAPACITY_BLOCK_ID = re.compile(r"capacityblockgroup-[A-Za-z0-9][A-Za-z0-9_-]*")
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"
)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
_AWS_ACCESS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
_SECRET_WORDS = (
    r"token|secret|passphrase|password|passwd|api[_-]?key|access[_-]?key|private[_-]?key|credentials?"
)
# `NAME=value` (environment, tfvars, URLs) and `"name": "value"` (JSON) where the name says "secret".
_SECRET_ASSIGNMENT = re.compile(rf"(?i)\b([\w.-]*(?:{_SECRET_WORDS})[\w.-]*=)([^\s&\"',;]+)")
_SECRET_JSON_FIELD = re.compile(rf"(?i)(\"[\w.-]*(?:{_SECRET_WORDS})[\w.-]*\"\s*:\s*)(\"(?:[^\"\\]|\\.)*\")")
# Pulumi's wire form of a secret value: {"4dabf18193072939515e22adb298388d": "1b47...", "plaintext": ...}.
_PULUMI_SECRET = re.compile(
    r"(\"4dabf18193072939515e22adb298388d\"\s*:\s*\"1b47061264138c4ac30d75fd1eb44270\"\s*,\s*"
    r"\"(?:value|plaintext|ciphertext)\"\s*:\s*)(\"(?:[^\"\\]|\\.)*\"|[^,}]*)"
)
_SECRET = "[secret]"


# Every pattern above needs one of these words; most cells (names, types, counts) have none, and a large
# fleet renders tens of thousands of cells, so those skip the full set (plain substring tests are fast).
_SUSPECT_WORDS = (
    "capacityblockgroup",
    "key",
    "eyj",
    "bearer",
    "akia",
    "asia",
    "token",
    "secret",
    "pass",
    "credential",
    "4dabf181",
)


def scrub(text: str) -> str:
    """Mask capacity-block ids and blank anything that looks like a credential."""
    lowered = text.lower()
    if not any(word in lowered for word in _SUSPECT_WORDS):
        return text
    text = _PRIVATE_KEY.sub(_SECRET, text)
    text = _PULUMI_SECRET.sub(lambda m: m.group(1) + f'"{_SECRET}"', text)
    text = _SECRET_JSON_FIELD.sub(lambda m: m.group(1) + f'"{_SECRET}"', text)
    text = _SECRET_ASSIGNMENT.sub(lambda m: m.group(1) + _SECRET, text)
    text = _JWT.sub(_SECRET, text)
    text = _BEARER.sub(lambda m: m.group(1) + _SECRET, text)
    text = _AWS_ACCESS_KEY_ID.sub(_SECRET, text)
    return _CAPACITY_BLOCK_ID.sub(lambda m: mask_id(m.group(0)), text)


def scrub_document(value: Any) -> Any:
    """`scrub` over every string of a JSON-shaped document (dicts and lists walked), e.g. an audit record
    or a webhook event."""
    if isinstance(value, dict):
        return {key: scrub_document(item) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub_document(item) for item in value]
    return scrub(value) if isinstance(value, str) else value


def replace_secrets(text: str, secrets: Iterable[str], replacement: str = "***") -> str:
    """`text` with every occurrence of each known secret replaced, longest first (a secret that contains
    another is never half-replaced)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, replacement)
    return text


def mask_secrets(value: Any, secrets: tuple[str, ...]) -> Any:
    """`value` with every string that contains one of `secrets` (run-time secrets: the IAM token,
    capacity-block reservations, which the recipe need not declare sensitive) replaced by `(sensitive)`."""
    if isinstance(value, Mapping):
        return {k: mask_secrets(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v, secrets) for v in value]
    if isinstance(value, str) and any(secret and secret in value for secret in secrets):
        return SENSITIVE
    return value
