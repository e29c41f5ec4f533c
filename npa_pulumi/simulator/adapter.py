"""What the cloud layer asks of the local cloud, registered as the `local` adapter of the
`npa_pulumi.clouds` entry-point group (pyproject.toml): `cloud/factory.py` finds it there, so nothing
below this package imports it."""

from __future__ import annotations

import urllib.parse
from typing import Any

from npa_pulumi.cloud.port import CloudPort


def make(**options: Any) -> CloudPort:
    """The local cloud behind the port (`directory`, `auto_init`, ... as `LocalCloud` takes them)."""
    from npa_pulumi.simulator.cloud import LocalCloud

    cloud: CloudPort = LocalCloud(**options)
    return cloud


def ensure_backend_served(url: str) -> None:
    """A backend URL in the local cloud's buckets (`backend init --cloud local`): start its S3 server,
    on the port the URL names, if it does not run (a reset or a reboot stopped it)."""
    from npa_pulumi.simulator import db, seaweedd

    endpoint = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query)).get("endpoint", "")
    cloud_dir = db.cloud_dir()
    if endpoint and seaweedd.serves(cloud_dir, endpoint):
        seaweedd.ensure_running(cloud_dir)
