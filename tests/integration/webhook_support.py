"""A webhook receiver for integration tests (`--notify URL`, the spec's `notify:`): an HTTP server on
127.0.0.1 that keeps every JSON event posted to it; the `webhook` fixture (conftest.py) starts one."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class Webhook:
    """Every event posted, decoded; `url` has a path like a chat webhook's (its secret part)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        events = self.events

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                events.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/T000/B000/webhooksecretpart"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    made = Webhook()
    yield made
    made.server.shutdown()
