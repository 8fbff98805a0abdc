"""Hostile HTTP answers: redirects to other schemes, credentials on a downgrade, headers that are no numbers.

Each case is served by a small real HTTP server on 127.0.0.1 whose answers the test writes; the reader must
end with an ``OpenError`` naming the shard (never an untyped error, never a request to a non-HTTP URL), and
credentials must never go to another origin or down to plain http.
"""

from __future__ import annotations

import http.server
import threading

import pytest

from shardstream.errors import ConfigError, OpenError
from shardstream.io.http import HttpStream
from shardstream.io.redirects import may_keep_credentials


class _Scripted:
    """Answers each GET with the next (status, headers, body) of ``answers``; records the requests."""

    def __init__(self, answers):
        self.answers, self.requests = list(answers), []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                outer.requests.append((self.path, dict(self.headers)))
                status, headers, body = outer.answers.pop(0) if outer.answers else (500, {}, b"")
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path="a.tar"):
        return f"http://alice:pw-1234@127.0.0.1:{self.server.server_address[1]}/{path}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted():
    servers = []

    def make(*answers):
        servers.append(_Scripted(answers))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def _read(url):
    with HttpStream(url, retries=1, backoff=0, sleep=lambda s: None) as s:
        return s.read()


@pytest.mark.parametrize("location", ["file:///etc/passwd", "ftp://127.0.0.1/a.tar", "javascript:alert(1)",
                                      "pipe:touch pwned", "http://[::1/a.tar", "http://127.0.0.1:port/a.tar"])
def test_a_redirect_leaves_http_only_with_an_error(scripted, location, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    server = scripted((302, {"Location": location, "Content-Length": "0"}, b""))
    with pytest.raises(OpenError, match="redirect") as caught:
        _read(server.url())
    assert "pw-1234" not in str(caught.value)
    assert len(server.requests) == 1 and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("length", ["abc", "1e3", "-5", "12, 300", "\u00b2"])
def test_a_content_length_that_is_no_number_is_an_open_error(scripted, length):
    server = scripted((200, {"Content-Length": length}, b"x" * 12))
    with pytest.raises(OpenError, match="Content-Length"):
        _read(server.url())


def test_a_retry_after_that_is_no_number_is_ignored(scripted):
    server = scripted((503, {"Retry-After": "\u00b2", "Content-Length": "0"}, b""),
                      (200, {"Content-Length": "3"}, b"abc"))
    assert _read(server.url()) == b"abc"


def test_a_port_that_is_no_number_is_a_config_error():
    with pytest.raises(ConfigError, match="port") as caught:
        HttpStream("https://user:pw-1234@ori:in.test/a.tar")
    assert "pw-1234" not in str(caught.value)


@pytest.mark.parametrize(("home", "there", "kept"), [
    (("https", "h", 443), ("https", "h", 443), True),
    (("http", "h", 80), ("https", "h", 443), True),   # an upgrade to https on the same host
    (("https", "h", 443), ("http", "h", 80), False),  # never down to plain http
    (("https", "h", 443), ("https", "other", 443), False),
    (("https", "h", 443), ("https", "h", 8443), False),
])
def test_credentials_follow_a_redirect_only_to_the_same_origin_or_up_to_https(home, there, kept):
    assert may_keep_credentials(home, there) is kept


def test_credentials_are_dropped_on_a_redirect_to_another_port(scripted):
    target = scripted((200, {"Content-Length": "3"}, b"abc"))
    port = target.server.server_address[1]
    first = scripted((302, {"Location": f"http://127.0.0.1:{port}/b.tar", "Content-Length": "0"}, b""))
    assert _read(first.url()) == b"abc"
    assert "Authorization" in first.requests[0][1]
    assert "Authorization" not in target.requests[0][1]
