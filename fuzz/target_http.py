"""Fuzz target: what an HTTP server answers (:mod:`shardstream.io.http`): ``Content-Range`` and the other headers
:class:`~shardstream.io.http.HttpStream` reads (status, ``Content-Length``, ``Location``, ``Retry-After``, ``ETag``,
``Last-Modified``, ``Content-MD5``, chunked bodies), across retries, resumes and redirects.

An input is JSON: ``{"url": ..., "start": N, "end": N or null, "answers": [raw HTTP answer, ...]}`` (answers as
latin-1 text). Every ``Content-Range`` value is given to :func:`~shardstream.io.http.split_status_line` (allowed: a
result or ``ValueError``), and checked against a strict reading of RFC 9110 (``bytes FIRST-LAST/COMPLETE``, ASCII
digits, one space, ``FIRST <= LAST < COMPLETE``): a malformed value accepted, a valid one refused or read otherwise is a
finding. Then an ``HttpStream`` reads the part ``[start, end)`` through a fake connection that serves the answers
in order (one per request; none left: connection refused). Allowed: the bytes, or an
:class:`~shardstream.errors.OpenError`. Findings besides those of :func:`targets.outcome`: fewer or more bytes than
the announced size without an error, a request after a redirect to a scheme other than http(s), credentials
sent to another host or over plain http after an https URL, a password in an error message.
"""

from __future__ import annotations

import http.client
import io
import json
import random
import re
from typing import Any
from urllib.parse import urlsplit

from mutators import flip
from targets import Finding, outcome

from shardstream.errors import ConfigError, OpenError
from shardstream.io.http import HttpStream, split_status_line

PASSWORD = "s3cr3tpw"
_RANGE = re.compile(r"bytes ([0-9]{1,30})-([0-9]{1,30})/([0-9]{1,30}|\*)", re.IGNORECASE)  # 30: int() takes it
MAX_BODY = 1 << 16  # bytes read from a stream at most (the answers are smaller)


def strict_content_range(value: str) -> tuple[int, int | None] | None:
    """``(FIRST, COMPLETE)`` of a valid ``Content-Range`` of a 206 answer (RFC 9110 section 14.4), else None."""
    m = _RANGE.fullmatch(value.strip(" \t"))
    if m is None:
        return None
    first, last = int(m.group(1)), int(m.group(2))
    total = None if m.group(3) == "*" else int(m.group(3))
    if last < first or (total is not None and last >= total):
        return None
    return first, total


def check_http(data: bytes, rng: random.Random) -> None:
    """Parse every Content-Range; read the part through the answers."""
    try:
        doc = json.loads(data)
        url, start, end = str(doc["url"]), int(doc["start"]), doc["end"]
        end = None if end is None else int(end)
        answers = [str(a).encode("latin-1", "replace") for a in doc["answers"]][:50]
    except (ValueError, KeyError, TypeError, OverflowError):
        return  # not an input of this target (a mutation broke the JSON)
    parts = urlsplit(url)
    if start < 0 or (end is not None and end < start) or parts.scheme not in ("http", "https") or not parts.hostname:
        return  # not something the library asks for (a bad URL given by the caller is a ConfigError, as it should)
    try:
        parts.port
    except ValueError:  # a port that is no number: the caller's URL, so a ConfigError (and no request)
        result = outcome(lambda: HttpStream(url, route=_Server([])), (ConfigError,))  # type: ignore[arg-type]
        if result[0] != "error":
            raise Finding(f"a URL whose port is not a number was accepted: {url!r}")
        return
    for answer in answers:
        for value in _headers(answer, "content-range"):
            _check_content_range(value)
    _check_stream(url, start, end, answers)


def _check_content_range(value: str) -> None:
    got = outcome(lambda: split_status_line(value), (ValueError,))
    strict = strict_content_range(value)
    if got[0] == "ok" and strict is None:
        raise Finding(f"split_status_line accepted the malformed Content-Range {value[:100]!r} as {got[1]}")
    if got[0] == "error" and strict is not None:
        raise Finding(f"split_status_line refused the valid Content-Range {value[:100]!r}: {got[2]}")
    if got[0] == "ok" and got[1] != strict:
        raise Finding(f"split_status_line read {value[:100]!r} as {got[1]}, not {strict}")


def _headers(answer: bytes, name: str) -> list[str]:
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    values = []
    for line in head.split("\r\n")[1:]:
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == name:
            values.append(value.strip())
    return values


class _Server:
    """The answers, served in order to the fake connections; records each request."""

    def __init__(self, answers: list[bytes]):
        self.answers, self.requests = list(answers), []

    def connection_for(self, parts: Any, timeout: float) -> tuple[str, tuple, Any]:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        key = (parts.scheme, parts.hostname, parts.port)
        return path, key, lambda: _Connection(self, parts)


class _Connection:
    def __init__(self, server: _Server, parts: Any):
        self.server, self.parts, self.sock = server, parts, None

    def request(self, method: str, target: str, headers: dict[str, str]) -> None:
        self.server.requests.append((self.parts.scheme, self.parts.netloc, dict(headers)))

    def getresponse(self) -> http.client.HTTPResponse:
        if not self.server.answers:
            raise ConnectionRefusedError("the fuzzed server has no answer left")
        resp = http.client.HTTPResponse(_Socket(self.server.answers.pop(0)), method="GET")  # type: ignore[arg-type]
        resp.begin()
        return resp

    def close(self) -> None:
        pass


class _Socket:
    def __init__(self, raw: bytes):
        self.raw = raw

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(io.BytesIO(self.raw))


def _check_stream(url: str, start: int, end: int | None, answers: list[bytes]) -> None:
    server = _Server(answers)
    got: list[bytes] = []
    holder: list[HttpStream] = []

    def read() -> None:
        stream = HttpStream(url, retries=3, backoff=0, sleep=lambda s: None, start=start, end=end,
                            route=server)  # type: ignore[arg-type]
        holder.append(stream)
        try:
            while sum(map(len, got)) < MAX_BODY:
                chunk = stream.read(rng_size(len(got)))
                if not chunk:
                    break
                got.append(chunk)
            stream.finish()
        finally:
            stream.close()

    result = outcome(read, (OpenError,))
    origin = urlsplit(url)
    for scheme, netloc, headers in server.requests:
        if scheme not in ("http", "https"):
            raise Finding(f"a request after a redirect to a {scheme!r} URL")
        if any(k.lower() == "authorization" for k in headers):
            if netloc.rpartition("@")[2] != origin.netloc.rpartition("@")[2]:
                raise Finding(f"credentials sent to another host: {netloc}")
            if origin.scheme == "https" and scheme == "http":
                raise Finding(f"credentials sent over plain http after an https URL: {netloc}")
    if result[0] == "error":
        if origin.password == PASSWORD and PASSWORD in result[2]:
            raise Finding(f"a password in an error message: {result[2][:300]}")
        return
    stream = holder[0]
    size = sum(map(len, got))
    limit = stream.size if end is None else (end if stream.size is None else min(end, stream.size))
    if limit is not None and size < MAX_BODY and size != max(0, limit - start):
        raise Finding(f"read {size} bytes of the part [{start}, {end}) of an object of {stream.size} bytes "
                      "without an error")


def rng_size(n: int) -> int:
    """Read sizes that vary with the read's number (deterministic)."""
    return (1, 7, 4096, 100, 65536)[n % 5]


# -- mutations --------------------------------------------------------------------------------------------------

_STATUS = ["200 OK", "206 Partial Content", "301 Moved", "302 Found", "307 Temporary", "308 Permanent", "404 No",
           "408 Timeout", "416 Range Not Satisfiable", "429 Slow down", "500 Oops", "503 Busy", "204 Empty",
           "304 Not Modified", "100 Continue", "999 What", "abc", "-1 Minus", "2000 Big"]  # fmt: skip
_HEADERS = {
    "Content-Range": ["bytes 0-9/10", "bytes 5-2/10", "bytes 0-9/5", "bytes -1-9/10", "bytes 0-9/-5",
                      "bytes \u0660-9/10", "bytes 1_0-20/30", "bytes +0-9/10", "bytes 0-9/*", "bytes */10", "BYTES 0-9/10",
                      "bytes  0-9/10", "bytes 0-9", "bytes 0 - 9 / 10", "items 0-9/10", "bytes 0-9/10/11", "bytes 0-/10",
                      "bytes " + "9" * 5000 + "-1/2", "bytes 0-9/1" + "0" * 30, "bytes\t0-9/10", "bytes 0-9/10, bytes 1-2/3",
                      "bytes 0-\u0669/10", "bytes 0-9/ 10", ""],
    "Content-Length": ["0", "-5", "abc", "10", "99999999999999999999", "1e3", " 12 ", "1_0", "\u0661\u0662", "10, 10",
                       "5", "100000"],
    "Retry-After": ["1", "0", "-1", "\u00b2", "\u0661", "1e9", "99999999999999999999", "Fri, 01 Jan 2100 00:00:00 GMT",
                    "", "nan"],
    "Location": ["/b.tar", "http://other.test/a.tar", "https://origin.test/c.tar", "http://origin.test/d.tar",
                 "ftp://origin.test/a.tar", "pipe:touch /tmp/shardstream-fuzz-pwned", "file:///etc/passwd", "//other.test/x",
                 "", "http://[::1", "http://user:pw@other.test/", "javascript:alert(1)", "\u00e9t\u00e9"],
    "ETag": ['"a"', '"b"', 'W/"a"', ""], "Last-Modified": ["Mon, 01 Jan 2024 00:00:00 GMT", "yesterday", ""],
    "Content-MD5": ["CY9rzUYh03PK3k6DJie09g==", "not base64!", "", "AAAA"],
    "Transfer-Encoding": ["chunked", "gzip, chunked", "identity", "chunked, chunked"],
    "Connection": ["close", "keep-alive"], "Content-Encoding": ["gzip", "identity"],
}  # fmt: skip


def _split(answer: str) -> tuple[str, list[str], str]:
    head, _, body = answer.partition("\r\n\r\n")
    lines = head.split("\r\n")
    return lines[0], lines[1:], body


def mutate_http(rng: random.Random, data: bytes) -> bytes:
    """A header set, replaced or removed; a status changed; a body cut or chunked; answers repeated, dropped or
    reordered; the range asked for changed; or bytes flipped."""
    try:
        doc = json.loads(data)
        answers = list(doc["answers"])
    except (ValueError, KeyError, TypeError):
        return flip(rng, data)
    if rng.random() < 0.05:
        return flip(rng, data)
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if not answers or roll < 0.08:
            answers.insert(rng.randrange(len(answers) + 1), "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")
            continue
        i = rng.randrange(len(answers))
        status, headers, body = _split(answers[i])
        if roll < 0.5:
            name = rng.choice(sorted(_HEADERS))
            value = rng.choice(_HEADERS[name])
            if name == "Content-Range" and rng.random() < 0.4:
                first = int(doc.get("start", 0) or 0)
                value = f"bytes {first}-{first + rng.choice([-1, 0, 9, 99, 10**6])}/{rng.choice([first + 10, 10**6, 5])}"
            headers = [h for h in headers if h.split(":")[0].strip().lower() != name.lower() or rng.random() < 0.2]
            headers.insert(rng.randrange(len(headers) + 1), f"{name}: {value}")
        elif roll < 0.62:
            status = "HTTP/1.1 " + rng.choice(_STATUS) if rng.random() < 0.9 else rng.choice(["", "HTTP/1.1", "HTTP/9 200"])
        elif roll < 0.7 and headers:
            del headers[rng.randrange(len(headers))]
        elif roll < 0.78:
            body = body[:rng.randrange(len(body) + 1)] if rng.random() < 0.7 else body + body
        elif roll < 0.83:
            body = "".join(f"{len(c):x}\r\n{c}\r\n" for c in (body[:5], body[5:]) if c) + rng.choice(["0\r\n\r\n", "", "zz\r\n"])
            headers = [h for h in headers if not h.lower().startswith("content-length")] + ["Transfer-Encoding: chunked"]
        elif roll < 0.88:
            answers.insert(i, answers[i])
        elif roll < 0.92:
            del answers[i]
        elif roll < 0.96:
            answers.reverse()
        else:
            doc["start"] = rng.choice([0, 1, 5, 10, 100, 999])
            doc["end"] = rng.choice([None, 1, 10, 11, 200, 10**6])
        if roll < 0.83:
            answers[i] = "\r\n".join([status, *headers]) + "\r\n\r\n" + body
    doc["answers"] = answers
    out = json.dumps(doc).encode()
    return flip(rng, out) if rng.random() < 0.03 else out


def answer(status: str, headers: dict[str, str], body: str) -> str:
    """One raw answer (for the seeds)."""
    return "\r\n".join([f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items())]) + "\r\n\r\n" + body


def corpus_seeds() -> dict[str, bytes]:
    """The checked-in seeds of this kind (``--make-corpus``)."""
    body = "".join(chr(48 + i % 40) for i in range(300))
    url = f"https://user:{PASSWORD}@origin.test/a.tar"
    docs = {
        "plain": (0, None, [answer("200 OK", {"Content-Length": "300", "ETag": '"a"'}, body)]),
        "resume": (0, None, [answer("200 OK", {"Content-Length": "300", "ETag": '"a"'}, body[:120]),
                             answer("206 Partial Content", {"Content-Range": "bytes 120-299/300", "ETag": '"a"'},
                                    body[120:])]),
        "part": (100, 200, [answer("206 Partial Content", {"Content-Range": "bytes 100-199/300",
                                                           "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT"},
                                   body[100:200])]),
        "retry": (0, None, [answer("503 Busy", {"Retry-After": "1", "Content-Length": "0"}, ""),
                            answer("200 OK", {"Content-Length": "300", "Content-MD5": "CY9rzUYh03PK3k6DJie09g=="},
                                   body)]),
        "redirect": (0, None, [answer("302 Found", {"Location": "/b.tar", "Content-Length": "0"}, ""),
                               answer("200 OK", {"Content-Length": "300"}, body)]),
        "chunked": (0, None, [answer("200 OK", {"Transfer-Encoding": "chunked"},
                                     f"{100:x}\r\n{body[:100]}\r\n{200:x}\r\n{body[100:]}\r\n0\r\n\r\n")]),
        "ignored-range": (0, None, [answer("200 OK", {"Content-Length": "300"}, body[:50]),
                                    answer("200 OK", {"Content-Length": "300"}, body)]),
        "unsatisfiable": (300, 400, [answer("416 Range Not Satisfiable", {"Content-Range": "bytes */300",
                                                                         "Content-Length": "0"}, "")]),
    }
    return {f"http-{name}.json": json.dumps({"url": url, "start": start, "end": end, "answers": answers}).encode()
            for name, (start, end, answers) in docs.items()}
