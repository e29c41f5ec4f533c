"""Headless Chromium for tests: found, or installed from Debian's packages when this runs as root with
apt-get (idempotent, with its progress on stderr); the test is skipped only when it truly cannot be."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",  # root in a container
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-extensions",
    "--enable-logging=stderr",
    "--log-level=0",
)
# Chromium logs every console message of the page as `...:INFO:CONSOLE:<line>] "message", source: ...`.
CONSOLE = re.compile(r":CONSOLE(?:\(\d+\)|:\d+)\]\s*(.*)")


def _find() -> str | None:
    return next((found for name in NAMES if (found := shutil.which(name))), None)


def chromium() -> str:
    found = _find()
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("installing chromium from Debian's packages (apt-get)", file=sys.stderr, flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], env=env, check=False, timeout=900)
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"],
            env=env,
            check=False,
            timeout=1800,
        )
        found = _find()
        if found:
            return found
    pytest.skip("chromium is not installed and cannot be installed here (needs root, apt-get, a mirror)")


@dataclass(frozen=True)
class Rendered:
    dom: str
    console: list[str]
    screenshot: Path


def _run(browser: str, *args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [browser, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def render(page: Path, screenshot: Path, size: str = "1280,1600") -> Rendered:
    """The page's DOM after load, every console message it produced, and a screenshot of it."""
    browser = chromium()
    url = page.resolve().as_uri()
    dumped = _run(browser, "--dump-dom", url, profile=screenshot.parent / ".chromium-dom")
    assert dumped.returncode == 0, dumped.stderr[-3000:]
    shot = _run(
        browser,
        f"--screenshot={screenshot}",
        f"--window-size={size}",
        url,
        profile=screenshot.parent / ".chromium-shot",
    )
    assert shot.returncode == 0, shot.stderr[-3000:]
    console = [
        m.group(1) for line in (dumped.stderr + shot.stderr).splitlines() if (m := CONSOLE.search(line))
    ]
    return Rendered(dumped.stdout, console, screenshot)
