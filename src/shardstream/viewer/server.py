"""The viewer's web server: the page, its static files and a JSON API, on the standard library's HTTP server.

Paths: ``/`` (the page, static/index.html), ``/static/sample.js``, ``/static/app.js``, ``/static/style.css``,
``/api/field/N/EXT`` (a field's bytes: images, audio and video with their type and Range support, else a
download), and the JSON API of :mod:`.routes` under ``/api/``.

Every response carries a strict Content-Security-Policy and ``nosniff``; a path segment ``.`` or ``..`` (also
percent-encoded), an empty segment or an unknown parameter value is a 4xx answer; on a loopback address only
requests for a loopback host name are served (a web page cannot rebind its own name to the viewer).

>>> from shardstream.writer import TarWriter
>>> from shardstream.viewer.data import ViewerData
>>> with TarWriter("tiny.tar") as sink:
...     _ = sink.write({"__key__": "a", "txt": "hello"})
>>> server = ViewerServer(ViewerData(["tiny.tar"]))
>>> server.url.startswith("http://127.0.0.1:")
True
>>> self_test(server)
'1 sample in 1 shard; sample 0 (a): txt'
>>> server.server_close(); server.data.close()
"""

from __future__ import annotations

import http.server
import json
import re
import secrets
import socket
import sys
import threading
import urllib.request
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ..errors import ConfigError
from ..logs import log_to_stderr
from ..redact import redacting_logger
from .data import ViewerData
from .render import MAX_DECODE, media_type, unwrap
from .routes import Answer, Api, Problem as HTTPProblem, number as _number
from .transform import TransformedView

__all__ = ["ViewerServer", "self_test"]

logger = redacting_logger(__name__)

_STATIC = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
           "sample.js": "text/javascript; charset=utf-8",
           "style.css": "text/css; charset=utf-8"}  # fmt: skip
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")  # fmt: skip
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class _Handler(http.server.BaseHTTPRequestHandler):
    server: ViewerServer
    protocol_version = "HTTP/1.1"
    _body = True  # whether the answer has a body (not for HEAD)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        logger.info("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(body=False)

    def _refuse(self) -> None:
        self.close_connection = True  # the request body (if any) is not read
        self._send_json({"error": f"method {self.command} not allowed"}, 405, extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse  # noqa: N815

    def _answer(self, body: bool) -> None:
        self._body = body
        try:
            self._check_host()
            self._route(*self._parse())
        except HTTPProblem as e:
            self._send_json({"error": str(e)}, e.status)
        except (IndexError, KeyError) as e:
            self._send_json({"error": f"not found: {e.args[0] if e.args else e}"}, 404)
        except ConfigError as e:
            self._send_json({"error": str(e)}, 400)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # never a dead page: a one-line error
            self._send_json({"error": f"{type(e).__name__}: {' '.join(str(e).split())}"}, 500)

    def _check_host(self) -> None:
        if not self.server.loopback:
            return
        host = self.headers.get("Host") or ""
        host = host.partition("]")[0] + "]" if host.startswith("[") else host.rsplit(":", 1)[0]
        if host.lower() not in _LOOPBACK:
            raise HTTPProblem(403, f"host {host!r} refused: the viewer answers to 127.0.0.1 and localhost only")

    def _parse(self) -> tuple[list[str], dict[str, str]]:
        parts = urlsplit(self.path)
        if not parts.path.startswith("/"):
            raise HTTPProblem(400, "bad request path")
        segments = [] if parts.path == "/" else parts.path[1:].split("/")
        try:
            decoded = [unquote(s, errors="strict") for s in segments]
        except UnicodeDecodeError:
            raise HTTPProblem(400, "bad percent-encoding in the path") from None
        for raw, text in zip(segments, decoded, strict=True):
            if raw in ("", ".", "..") or text in ("", ".", "..") or "\0" in text:
                raise HTTPProblem(400, f"bad path segment {raw!r}")
        try:
            query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False, errors="strict")
        except UnicodeDecodeError:
            raise HTTPProblem(400, "bad query string") from None
        if any(len(values) > 1 for values in query.values()):
            raise HTTPProblem(400, "a query parameter is repeated")
        return decoded, {name: values[0] for name, values in query.items()}

    def _route(self, path: list[str], query: dict[str, str]) -> None:
        if not path or path == ["index.html"]:
            return self._static("index.html")
        head, rest = path[0], path[1:]
        if head == "static" and len(rest) == 1:
            return self._static(rest[0])
        if head != "api" or not rest:
            raise HTTPProblem(404, "no such page")
        name, args = rest[0], rest[1:]
        if name == "field" and len(args) == 2:
            i = _number(args[0])
            return self._field(i, self.server.api.ext(i, args[1]))
        value = self.server.api.answer(name, args, query)
        if isinstance(value, Answer):
            return self._send(value.body, value.kind, cache=value.cache)
        if name == "info":
            value = {**value, "token": self.server.token}
        return self._send_json(value)

    def _field(self, i: int, ext: str) -> None:
        data = self.server.data
        size = next(size for name, _, size in data.members(i) if name == ext)
        inner = ext
        if ext == "gz" or ext.endswith(".gz"):
            if size > MAX_DECODE:
                raise HTTPProblem(413, f"field {ext!r} is too large to gunzip here")
            inner, plain = unwrap(ext, data.read(i, ext))
            return self._send(plain, media_type(inner) or "application/octet-stream", cache=True,
                              download=media_type(inner) is None)  # fmt: skip
        kind = media_type(ext) or "application/octet-stream"
        start, end = self._range(size)
        headers = {"Accept-Ranges": "bytes"}
        if (start, end) != (0, size):
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        self._start(206 if "Content-Range" in headers else 200, kind, end - start, cache=True,
                    download=media_type(ext) is None, extra=headers)  # fmt: skip
        if self._body:
            sent = 0
            for piece in data.chunks(i, ext):
                lo, hi = max(start - sent, 0), min(end - sent, len(piece))
                if lo < hi:
                    self.wfile.write(piece[lo:hi])
                sent += len(piece)
                if sent >= end:
                    break

    def _range(self, size: int) -> tuple[int, int]:
        match = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "").strip())
        if match is None or match.groups() == ("", ""):
            return 0, size
        a, b = match.groups()
        start, end = (size - int(b), size) if a == "" else (int(a), min(size, int(b) + 1) if b else size)
        if not 0 <= start < end:
            raise HTTPProblem(416, f"range not satisfiable for {size} bytes")
        return start, end

    def _static(self, name: str) -> None:
        if name not in _STATIC:
            raise HTTPProblem(404, "no such file")
        body = resources.files(__package__).joinpath("static").joinpath(name).read_bytes()
        self._send(body, _STATIC[name])

    def _send_json(self, value: Any, status: int = 200, extra: dict[str, str] | None = None) -> None:
        self._send(json.dumps(value, ensure_ascii=False).encode(), "application/json; charset=utf-8", status,
                   extra=extra)  # fmt: skip

    def _send(self, body: bytes, kind: str, status: int = 200, *, cache: bool = False, download: bool = False,
              extra: dict[str, str] | None = None) -> None:  # fmt: skip
        self._start(status, kind, len(body), cache=cache, download=download, extra=extra)
        if self._body:
            self.wfile.write(body)

    def _start(self, status: int, kind: str, length: int, *, cache: bool, download: bool,
               extra: dict[str, str] | None) -> None:  # fmt: skip
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(length))
        self.send_header("Cache-Control", "private, max-age=86400" if cache else "no-store")
        self.send_header("Content-Security-Policy", _CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        if download:
            self.send_header("Content-Disposition", "attachment")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()


class ViewerServer(http.server.ThreadingHTTPServer):
    """The viewer's HTTP server over a :class:`~shardstream.viewer.data.ViewerData` (port 0: a free port).

    ``transformed``: what ``--decode``/``--transform`` make of a sample (shown beside the stored fields);
    ``scan_limit``: how many samples the statistics, the table, the filters and the problem marks cover.
    """

    daemon_threads = True

    def __init__(self, data: ViewerData, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False,
                 transformed: TransformedView | None = None, scan_limit: int = 20000):
        self.data, self.verbose = data, verbose
        if verbose:
            log_to_stderr()
        self.api = Api(data, transformed, scan_limit)
        self.token = secrets.token_hex(4)  # changes with every start: the page's image URLs carry it
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.loopback = host in _LOOPBACK or host.startswith("127.")
        super().__init__((host.strip("[]"), port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a browser closing its connections is normal
            logger.error("error while answering %s", client_address, exc_info=True)

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), self.server_address[1]
        return f"http://{f'[{host}]' if ':' in str(host) else host}:{port}/"


def self_test(server: ViewerServer) -> str:
    """Serve a few requests from ``server`` in a thread (the page, info, a listing, sample 0, its thumbnail and
    its transformed form)
    and describe what came back; raises on any failure. For ``shardstream view --check``."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy

        def get(path: str) -> bytes:
            with opener.open(server.url.rstrip("/") + path, timeout=30) as answer:
                return answer.read()

        if b"app.js" not in get("/"):
            raise RuntimeError("the page does not load its script")
        info = json.loads(get("/api/info"))
        n, shards = info["samples"], len(info["shards"])
        text = f"{n} sample{'s' * (n != 1)} in {shards} shard{'s' * (shards != 1)}"
        if n:
            item = json.loads(get("/api/samples?limit=1"))["items"][0]
            sample = json.loads(get("/api/sample/0"))
            text += f"; sample 0 ({item['key']}): {', '.join(f['ext'] for f in sample['fields'])}"
            if item["thumb"] is not None:
                get("/api/thumb/0")
                text += f"; thumbnail of .{item['thumb']}"
            if sample["transformed"]:
                result = json.loads(get("/api/transformed/0"))
                if result["error"]:
                    raise RuntimeError(f"{result['spec']} failed on sample 0: {result['error']}")
                text += f"; {result['spec']}: {', '.join(p['name'] for p in result['parts'])}"
        return text
    finally:
        server.shutdown()
        thread.join()
