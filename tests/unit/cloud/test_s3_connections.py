"""The S3 client keeps its connections open between requests (cloud/nebius/s3.py), against a plain local
HTTP/1.1 server that counts the connections it accepts."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest
from pydantic import SecretStr

from npa_pulumi.cloud.nebius.s3 import S3Client


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless an answer says `Connection: close`
    connections: ClassVar[list[int]] = []
    seen: ClassVar[list[dict[str, str]]] = []
    close_after_answer = False
    drop_next = False

    def setup(self) -> None:
        super().setup()
        self.connections.append(1)

    def do_POST(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        if type(self).drop_next:
            type(self).drop_next = False
            self.close_connection = True
            return
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = b"hello" if self.path.endswith("/b/k") else b"<Error><Code>NoSuchKey</Code></Error>"
        self.send_response(200 if self.path.endswith("/b/k") else 404)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"e1"')
        if type(self).close_after_answer:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[http.server.ThreadingHTTPServer]:
    _Handler.connections.clear()
    _Handler.seen.clear()
    _Handler.close_after_answer = False
    _Handler.drop_next = False
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _client(httpd: http.server.ThreadingHTTPServer) -> S3Client:
    host, port = httpd.server_address[:2]
    return S3Client(f"http://{host!s}:{port}", "us-east-1", "AKIAEXAMPLE", SecretStr("s"), timeout_s=5)


def test_requests_reuse_one_open_connection(server: http.server.ThreadingHTTPServer) -> None:
    client = _client(server)
    answers = [client.request("GET", "b", "k") for _ in range(5)] + [client.request("GET", "b", "gone")]
    assert [a.status for a in answers] == [200] * 5 + [404]
    assert answers[0].body == b"hello" and answers[-1].error_code() == "NoSuchKey"
    assert {k.lower(): v for k, v in answers[0].headers.items()}["etag"] == '"e1"'
    assert len(_Handler.connections) == 1  # one TCP connection for six requests


def test_a_conditional_header_is_sent_and_signed(server: http.server.ThreadingHTTPServer) -> None:
    _client(server).request("GET", "b", "k", conditions={"If-None-Match": '"e1"'})
    sent = _Handler.seen[-1]
    assert sent["if-none-match"] == '"e1"'
    assert "if-none-match" in sent["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")


def test_a_connection_the_server_closes_is_not_reused(server: http.server.ThreadingHTTPServer) -> None:
    _Handler.close_after_answer = True
    client = _client(server)
    assert [client.request("GET", "b", "k").status for _ in range(3)] == [200, 200, 200]
    assert len(_Handler.connections) == 3


def test_a_kept_connection_the_server_dropped_is_replaced(server: http.server.ThreadingHTTPServer) -> None:
    client = _client(server)
    assert client.request("GET", "b", "k").status == 200
    _Handler.drop_next = True  # the server closes the kept connection without answering
    assert client.request("GET", "b", "k").status == 200  # sent again, on a new connection
    assert len(_Handler.connections) == 2
    _Handler.drop_next = True
    with pytest.raises(OSError):  # a request that may have had an effect is not sent twice
        client.request("POST", "b", "k", body=b"x")


def test_a_port_that_is_not_a_number_is_refused_at_once() -> None:
    with pytest.raises(ValueError):
        S3Client("http://127.0.0.1:90x0", "us-east-1", "AKIAEXAMPLE", SecretStr("s"))
