"""Servers that misbehave on purpose, on 127.0.0.1, for the fault tests of remote shards.

- :class:`FaultProxy`: a TCP proxy that cuts connections at random byte offsets, resets them, answers 500/503
  and stalls, with a seeded random plan and a bound on consecutive faults that make no progress.
- :class:`ForwardProxy`: a forwarding HTTP proxy (absolute-form requests and CONNECT tunnels) that counts them.
- :class:`StubHTTP`: a small Python HTTP server with switchable misbehaviour (no Range support, a changing
  ETag, short bodies, Content-MD5, wrong Content-Range, delays) and an AIStore gateway/target emulation (no
  AIStore server can be installed here).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import socket
import socketserver
import struct
import threading
import time
import urllib.parse

from link_emulator import FaultPlan

LOOPBACK = "127.0.0.1"


# -- fault-injecting proxy ---------------------------------------------------------------------------------------

class FaultProxy:
    """A TCP proxy in front of ``upstream`` that misbehaves on purpose (see the module docstring).

    ``weights`` maps actions to relative probabilities: ``pass``, ``cut`` (relay, then close after a random
    number of response bytes in ``cut_range``), ``reset`` (RST after the request), ``500``, ``503``, ``stall``
    (hold the connection ``stall`` seconds, then close), drawn by a :class:`link_emulator.FaultPlan` (the one
    plan of the emulator too). ``counts`` tallies actions.
    """

    def __init__(self, upstream_port: int, *, seed: int = 0, weights: dict[str, float] | None = None,
                 cut_range: tuple[int, int] = (2000, 200_000), stall: float = 1.5, max_unproductive: int = 2,
                 max_stalls: int = 2):
        self.upstream = (LOOPBACK, upstream_port)
        self.plan = FaultPlan(weights, seed=seed, cut_range=cut_range, max_unproductive=max_unproductive,
                              max_stalls=max_stalls)
        self.stall = stall
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._socks: set[socket.socket] = set()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((LOOPBACK, 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self._stopped = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def url(self, path: str = "") -> str:
        return f"http://{LOOPBACK}:{self.port}/{path.lstrip('/')}"

    @property
    def counts(self) -> dict[str, int]:
        return self.plan.counts

    @property
    def faults(self) -> int:
        return self.plan.faults

    def _choose(self) -> tuple[str, int, bool]:
        with self._lock:
            return self.plan.choose()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(client,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, client: socket.socket) -> None:
        self._socks.add(client)
        upstream = None
        try:
            request = b""
            while b"\r\n\r\n" not in request and len(request) < 65536:
                chunk = client.recv(65536)
                if not chunk:
                    return
                request += chunk
            action, cut, rst = self._choose()
            if action in ("500", "503"):
                reason = "Internal Server Error" if action == "500" else "Service Unavailable"
                client.sendall(f"HTTP/1.1 {action} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
                return
            if action == "stall":
                self._stopped.wait(self.stall)
                return
            if action == "reset":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            upstream = socket.create_connection(self.upstream)
            self._socks.add(upstream)
            upstream.sendall(request)
            limit = cut if action == "cut" else None
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            sent = 0
            while limit is None or sent < limit:
                data = upstream.recv(65536 if limit is None else min(65536, limit - sent))
                if not data:
                    break
                client.sendall(data)
                sent += len(data)
            if action == "cut" and rst:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                if s is not None:
                    self._socks.discard(s)
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RD)  # wakes the pump thread; with SO_LINGER 0, close sends RST
                    with contextlib.suppress(OSError):
                        s.close()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        """Client -> upstream (further requests on a kept-alive connection)."""
        with contextlib.suppress(OSError):
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (Linux)
        with contextlib.suppress(OSError):
            self.listener.close()
        for s in list(self._socks):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self._acceptor.join(5)


# -- Python stub server ------------------------------------------------------------------------------------------

class _Server(socketserver.ThreadingTCPServer):
    request_queue_size = 128  # a ranged reader connects 16 times at once (the default backlog is 5)


class StubHTTP:
    """A threaded Python HTTP server over ``files`` (path -> bytes) with switchable misbehaviour.

    Flags: ``ranges`` (answer Range requests with 206; False: always 200 with everything; ``"first"``: 206 to a
    Range from byte 0 only, 200 to the others), ``unknown_total`` (``Content-Range: bytes A-B/*``), ``etag_changes``
    (a new ETag after the first request), ``short`` (send that many bytes less than Content-Length, then
    close), ``md5`` (send Content-MD5; ``"wrong"`` sends a wrong one), ``bad_range_start`` (206 from the wrong
    offset), ``status`` (answer this status to everything), ``delay`` (seconds before each answer),
    ``first_delay`` (seconds before answering a request from byte 0: the other parts answer first),
    ``hold_after`` (send that many body bytes of the first answer, then wait until ``release`` is set),
    ``hold_at`` (every ranged answer sends the object's bytes before this offset only, then waits until
    ``release`` is set; ``sent`` counts the body bytes sent, all answers together, as the socket takes them),
    ``length`` (False: no ``Content-Length``, the body ends when the connection closes), ``no_content_range``
    (that many 206 answers, the first ones, leave out ``Content-Range``: a header block cut short),
    ``fail_first`` (a status, e.g. 503, answered once to the first request of each path, with ``Retry-After: 0``),
    ``short_once`` (``short`` applies to the first request of each path only), ``hold_first`` (the answer to a
    request from byte 0 waits, headers and all, until ``release`` is set), ``refuse_once`` (``Range`` headers:
    the first request with each is answered 403, a permanent error; ``hold_refused``: those answers wait until
    ``release`` is set; ``refused`` counts the ones sent).
    ``requests`` lists ``(path, range header)`` of the GETs; ``heads`` the paths of HEAD requests (answered 405);
    ``connections`` counts the connections accepted.
    AIStore emulation: ``ais=True`` makes ``/v1/objects/BUCKET/OBJ?provider=P`` a gateway that redirects (307)
    to ``/target/P/BUCKET/OBJ`` on the same server, which serves ``files["P/BUCKET/OBJ"]``.
    """

    def __init__(self, files: dict[str, bytes] | None = None, **flags):
        self.files = dict(files or {})
        self.flags = {"ranges": True, "etag_changes": False, "short": 0, "md5": None, "bad_range_start": False,
                      "status": None, "ais": False, "delay": 0.0, "first_delay": 0.0, "hold_after": None, "hold_at": None,
                      "length": True, "no_content_range": 0, "fail_first": None, "short_once": False,
                      "unknown_total": False, "hold_first": False, "refuse_once": (), "hold_refused": False,
                      **flags}
        self.release = threading.Event()
        self.requests: list[tuple[str, str | None]] = []
        self.heads: list[str] = []
        self.connections = 0
        self.refused = 0
        self._refused_ranges: set[str] = set()
        self.sent = 0
        self._sent_lock = threading.Lock()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # noqa: N802
                stub._handle(self)

            def do_HEAD(self):  # noqa: N802 - a size probe: counted, refused
                stub.heads.append(urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).lstrip("/"))
                stub._reply(self, 405, b"")

        self.server = _Server((LOOPBACK, 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # resets by the fault proxy are expected
        self.port = self.server.server_address[1]
        accept = self.server.process_request

        def counted(request, address) -> None:
            self.connections += 1
            accept(request, address)

        self.server.process_request = counted  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def url(self, path: str = "") -> str:
        return f"http://{LOOPBACK}:{self.port}/{path.lstrip('/')}"

    def full_gets(self, path: str) -> int:
        """Downloads of ``path`` begun: GETs without a Range, or with one from byte 0 (a ranged reader's first)."""
        return sum(1 for p, r in self.requests if p == path and (r is None or r.startswith("bytes=0-")))

    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        f = self.flags
        parts = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(parts.path).lstrip("/")
        rng = h.headers.get("Range")
        self.requests.append((path, rng))
        if f["status"] or (f["fail_first"] and sum(1 for p, _ in self.requests if p == path) == 1):
            self._reply(h, f["status"] or f["fail_first"], b"", {"Retry-After": "0"})
            return
        if rng and self._refused(rng):
            if f["hold_refused"]:
                self.release.wait(30)
            self._reply(h, 403, b"refused")
            with self._sent_lock:
                self.refused += 1
            return
        if f["ais"] and path.startswith("v1/objects/"):
            provider = urllib.parse.parse_qs(parts.query).get("provider", ["ais"])[0]
            bucket, _, obj = path[len("v1/objects/"):].partition("/")
            location = f"/target/{provider}/{bucket}/{urllib.parse.quote(obj)}"
            self._reply(h, 307, b"", {"Location": location})
            return
        key = path[len("target/"):] if f["ais"] and path.startswith("target/") else path
        data = self.files.get(key)
        if data is None:
            self._reply(h, 404, b"not found")
            return
        if f["delay"]:
            time.sleep(f["delay"])
        if f["first_delay"] and (rng is None or rng.startswith("bytes=0-")):
            time.sleep(f["first_delay"])
        if f["hold_first"] and (rng is None or rng.startswith("bytes=0-")):
            self.release.wait(30)
        first_request = sum(1 for p, _ in self.requests if p == path) == 1
        etag = '"v1"' if first_request or not f["etag_changes"] else '"v2"'
        short = f["short"] if first_request or not f["short_once"] else 0
        headers = {"ETag": etag, "Accept-Ranges": "bytes" if f["ranges"] else "none"}
        if f["md5"]:
            digest = hashlib.md5(data if f["md5"] != "wrong" else data + b"x").digest()
            headers["Content-MD5"] = base64.b64encode(digest).decode()
        start = 0
        if rng and f["ranges"] and (f["ranges"] != "first" or rng.startswith("bytes=0-")):
            start = int(rng.split("=")[1].split("-")[0])
            shown = start + 7 if f["bad_range_start"] else start
            end = len(data)
            if rng.rsplit("-", 1)[1].strip():
                end = min(len(data), int(rng.rsplit("-", 1)[1]) + 1)
            if start >= len(data):
                self._reply(h, 416, b"", {"Content-Range": f"bytes */{len(data)}"})
                return
            headers["Content-Range"] = f"bytes {shown}-{end - 1}/{'*' if f['unknown_total'] else len(data)}"
            if f["no_content_range"]:
                f["no_content_range"] -= 1
                del headers["Content-Range"]
            hold = f["hold_after"] if first_request else None
            if f["hold_at"] is not None:
                hold = max(0, f["hold_at"] - start)
            self._reply(h, 206, data[start:end], headers, short=short, hold=(hold, self.release),
                        count=self._count)
        else:
            if not f["length"]:
                headers["Content-Length"] = None
            self._reply(h, 200, data, headers, short=short, count=self._count)

    def _refused(self, rng: str) -> bool:
        with self._sent_lock:
            if rng in self.flags["refuse_once"] and rng not in self._refused_ranges:
                self._refused_ranges.add(rng)
                return True
            return False

    def _count(self, n: int) -> None:
        with self._sent_lock:
            self.sent += n

    @staticmethod
    def _reply(h, status: int, body: bytes, headers: dict | None = None, short: int = 0,
               hold: tuple = (None, None), count=lambda n: None) -> None:
        h.send_response(status)
        headers = dict(headers or {})
        length = "Content-Length" not in headers
        for k, v in headers.items():
            if v is not None:
                h.send_header(k, v)
        if length:
            h.send_header("Content-Length", str(len(body)))
        if short or not length:
            h.send_header("Connection", "close")
        h.end_headers()
        body = body[: max(0, len(body) - short)] if short else body
        with contextlib.suppress(OSError):
            if hold[0] is not None:
                h.wfile.write(body[: hold[0]])
                h.wfile.flush()
                count(len(body[: hold[0]]))
                hold[1].wait(30)
                body = body[hold[0]:]
            view = memoryview(body)  # sent in pieces, counted as the socket takes them (a reader may stop early)
            for at in range(0, len(body), 256 << 10):
                count(h.wfile.write(view[at:at + (256 << 10)]) or 0)
        if short or not length:
            h.close_connection = True

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- a forwarding HTTP proxy -------------------------------------------------------------------------------------

class ForwardProxy:
    """A small forwarding HTTP proxy on loopback that counts what goes through it.

    Plain requests come in absolute form (``GET http://host:port/path``) and are relayed to that server (the
    request line rewritten to ``/path``, ``Proxy-*`` headers dropped); ``CONNECT host:port`` opens a tunnel.
    ``targets`` lists the ``host:port`` of every connection relayed; with ``auth=(user, password)`` a request
    without the matching ``Proxy-Authorization`` is answered 407.
    """

    def __init__(self, auth: tuple[str, str] | None = None):
        self.targets: list[str] = []
        self.refused = 0
        self._auth = "Basic " + base64.b64encode(":".join(auth).encode()).decode() if auth else None
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((LOOPBACK, 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self._socks: set[socket.socket] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        self._socks.add(client)
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = client.recv(65536)
                if not chunk:
                    return
                head += chunk
            head, _, rest = head.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ", 2)
            fields = [line for line in lines[1:] if line]
            given = next((line.split(":", 1)[1].strip() for line in fields
                          if line.lower().startswith("proxy-authorization:")), None)
            if self._auth is not None and given != self._auth:
                self.refused += 1
                client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n"
                               b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                return
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                upstream = socket.create_connection((host.strip("[]"), int(port)))
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                first = rest
            else:
                parts = urllib.parse.urlsplit(target)
                upstream = socket.create_connection((parts.hostname, parts.port or 80))
                path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                kept = [line for line in fields if not line.lower().startswith("proxy-")]
                first = "\r\n".join([f"{method} {path} {version}", *kept, "", ""]).encode("latin-1") + rest
                host, port = parts.hostname, str(parts.port or 80)
            self.targets.append(f"{host}:{port}")
            self._socks.add(upstream)
            if first:
                upstream.sendall(first)
            threading.Thread(target=self._relay, args=(upstream, client), daemon=True).start()
            self._relay(client, upstream)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                if s is not None:
                    self._socks.discard(s)
                    with contextlib.suppress(OSError):
                        s.close()

    @staticmethod
    def _relay(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.listener.close()
        for s in list(self._socks):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
