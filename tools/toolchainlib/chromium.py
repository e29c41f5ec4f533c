"""Headless Chromium for the report page's browser test (tests/integration/test_report_browser.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .common import ToolchainError, run_streaming, say
from .pins import Pins

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def ensure(pins: Pins) -> None:
    """Debian's package, installed when this runs as root with apt-get (CI's fresh Debian machine). Not
    part of `all`: `make test` asks for it. Where it cannot be installed, the browser test is skipped,
    loudly."""
    found = find_chromium()
    if found:
        say(f"chromium from PATH ({found}; nothing to do)")
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        say(
            "chromium is not installed and cannot be installed here (needs root and apt-get): "
            "the report's browser test will be skipped; `apt-get install chromium` provides it"
        )
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        run_streaming(["apt-get", "update", "-q"], Path("/"), env, "apt-get update")
        run_streaming(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"],
            Path("/"),
            env,
            "apt-get install chromium",
        )
    except ToolchainError as err:
        say(f"could not install chromium (the report's browser test will be skipped): {err}")
        return
    say(f"chromium installed ({find_chromium()})")
