"""Naming rules shared by the spec and the plan: slugs, DNS labels, stack names, spec paths, suggestions."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

# A spec path as a tuple: ("projects", 1, "clusters", 0, "gpu_nodes", "preset").
PathTuple = tuple[str | int, ...]

DNS_LABEL_MAX = 63
# Pulumi stack names: letters, digits, `_`, `.` and `-`, at most 100 characters.
STACK_NAME_MAX = 100
_STACK_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
_PLAIN_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


# `[registry[:port]/]repository@sha256:<64 hex>`: an image reference pinned by content (a tag may precede
# the digest; the runtime pulls by the digest alone).
_DIGEST_PINNED_RE = re.compile(
    r"(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?@sha256:[0-9a-f]{64}"
)


def is_digest_pinned(image: str) -> bool:
    """Whether `image` names its content by digest (`name@sha256:<64 lowercase hex>`)."""
    return bool(_DIGEST_PINNED_RE.fullmatch(image))


def slug(value: str) -> str:
    """The original tool's slug: lower-case, strip, non-alphanumerics to `-`, collapse `--`, trim `-`."""
    out = "".join(ch if (ch.isalnum() or ch == "-") else "-" for ch in value.strip().lower())
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-")


def is_dns_label(value: str) -> bool:
    """Non-empty, at most 63 characters, already its own slug, starting with an alphanumeric."""
    return bool(value) and len(value) <= DNS_LABEL_MAX and value == slug(value) and value[0].isalnum()


def stack_name_problem(name: str) -> str | None:
    """Why `name` cannot be a Pulumi stack name, or None when it can."""
    if not _STACK_NAME_RE.fullmatch(name):
        return f"stack name {name!r} may only contain letters, digits, '_', '.' and '-'"
    if len(name) > STACK_NAME_MAX:
        return f"stack name {name!r} is {len(name)} characters; Pulumi allows at most {STACK_NAME_MAX}"
    return None


def project_stack_name(fleet: str, project_key: str) -> str:
    return f"{fleet}.{project_key}"


def cluster_stack_name(fleet: str, project_key: str, cluster: str) -> str:
    return f"{fleet}.{project_key}.{cluster}"


def format_path(path: Sequence[str | int]) -> str:
    """`("projects", 1, "name")` → `projects[1].name`; odd keys are quoted: `repos["a.list"]`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY_RE.fullmatch(part):
            out += f".{part}" if out else part
        else:
            escaped = part.replace("\\", "\\\\").replace('"', '\\"')
            out += f'["{escaped}"]'
    return out


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The closest valid choice to a misspelt `word`, if any is close enough."""
    matches = difflib.get_close_matches(word, sorted(set(choices)), n=1, cutoff=0.6)
    return matches[0] if matches else None


def unknown_key_hint(word: str, choices: Iterable[str]) -> str:
    options = sorted(set(choices))
    suggestion = did_you_mean(word, options)
    return f"did you mean '{suggestion}'?" if suggestion else "valid fields: " + ", ".join(options)
