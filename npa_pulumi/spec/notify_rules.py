"""The fleet's `notify:` list: the webhooks a run posts to when it needs a person (output/notifications.py),
beside `--notify URL`.

    notify:
      - https://hooks.example.com/fleet-events       # a URL, kept in the spec
      - ${SLACK_WEBHOOK_URL}                         # or an environment variable that holds one

Each entry is an `http://` or `https://` URL with a host, or `${NAME}` (`$NAME`) naming an environment
variable read when a notification is posted (a Slack webhook's path is its secret: keep such URLs out of a
committed spec). Problems name the entry (`notify[1]`) and never echo it: the URL may be the secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import urlsplit

from npa_pulumi.spec.models import FleetSpec
from npa_pulumi.spec.problems import RawProblem

_ENV = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
SCHEMES = ("http", "https")
EXAMPLE = "e.g. https://hooks.example.com/fleet or ${SLACK_WEBHOOK_URL}"


def env_name(entry: str) -> str | None:
    """`${NAME}` or `$NAME`: the variable's name; None for anything else (a URL)."""
    match = _ENV.fullmatch(entry.strip())
    return (match.group(1) or match.group(2)) if match else None


def url_problem(url: str) -> str | None:
    """Why `url` is no webhook URL (never quoting it), or None."""
    if not url or any(c.isspace() for c in url):
        return "is not a URL (empty, or with spaces)"
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError:
        return "is not a URL"
    if parts.scheme.lower() not in SCHEMES:
        scheme = parts.scheme.lower()
        return f"must be an http(s) URL (its scheme is {scheme!r})" if scheme else "must be an http(s) URL"
    if not host:
        return "has no host"
    return None


def check_notify(spec: FleetSpec) -> Iterator[RawProblem]:
    seen: dict[str, int] = {}
    for index, entry in enumerate(spec.notify):
        path = ("notify", index)
        value = entry.strip()
        if value.startswith("$"):
            if env_name(value) is None:
                yield RawProblem(path, "names no environment variable", "write ${NAME} or $NAME")
        else:
            why = url_problem(value)
            if why is not None:
                yield RawProblem(path, f"the webhook {why}", EXAMPLE)
        if value in seen:
            yield RawProblem(path, f"repeats notify[{seen[value]}]", "each webhook once")
        seen.setdefault(value, index)
