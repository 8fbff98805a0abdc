"""A long, thin network link on loopback: a TCP proxy that delays, shapes and (optionally) breaks connections.

These machines have no ``netem``; this proxy stands in for it, for the tests and for
``benchmarks/bench_remote_link.py``. In front of one upstream server (nginx, RadosGW) it adds:

- a one-way ``delay`` in each direction (so a request and its first answer byte cost one RTT = 2 x delay);
- with ``handshake``, the cost of opening a connection: loopback accepts at once, so the first bytes a new
  connection sends reach the server no sooner than 1.5 RTT after it was accepted (SYN, SYN-ACK, then the request),
  as on a real link, where a kept-alive connection saves that round trip;
- a cap on each connection's throughput, ``conn_rate`` (bytes/s: the window / RTT limit of one TCP stream);
- a cap on all connections together, ``link_rate`` (bytes/s: the link);
- faults on a seeded random plan (:class:`FaultPlan`, the same actions as ``fault_servers.FaultProxy``): ``cut``
  (close after a random number of answer bytes), ``reset`` (RST after the request), ``500``/``503`` answers and
  ``stall`` (hold the connection, then close).

It runs in its own process (asyncio), so that it does not share a GIL with the reader being measured. Its cost,
measured on the 2-core development machine: 0.7-1.9 ms of CPU per MB (two kernel copies of every byte, one timer
per chunk, chunks of up to 1 MiB), about as much as the limit's fetcher (0.6-0.9 ms/MB) and about half of a
reader in a DataLoader worker (1.7-1.9 ms/MB), i.e. 0.15-0.35 of a core at 200 MB/s; the benchmark prints it
with every emulator it stops, so a busy machine shows up as CPU, not as the reader.

``LinkEmulator(upstream_port, delay=0.02, conn_rate=25e6, link_rate=200e6)`` starts it on a free port; ``stop()``
ends it and returns its counters (connections, the most open at once, bytes, chunks, fault actions, its CPU).
Run as a script, it serves until SIGTERM::

    python tests/io/link_emulator.py --upstream 8080 --delay-ms 20 --conn-rate 25e6 --link-rate 200e6

Shaping model: an answer chunk that arrives from upstream at ``t`` takes ``len / conn_rate`` of its connection
from ``max(t, connection free)`` and ``len / link_rate`` of the link from ``max(t, link free)``, and is
delivered ``delay`` after the later of the two ends. Reading from upstream pauses while
a connection has more than ~100 ms of answer waiting (or the client stops reading), so TCP back-pressure reaches
the server as it would on a real link.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable

LOOPBACK = "127.0.0.1"
_READ_SIZE = 1 << 20  # the most one read from upstream takes (asyncio reads 256 KiB)
_BACKLOG_S = 0.1  # seconds of answer a connection may hold before the upstream is paused (slack for a busy CPU)


class FaultPlan:
    """Which fault each new connection gets: ``weights`` (action -> relative probability) drawn with ``seed``.

    After ``max_unproductive`` faults in a row that deliver no body bytes the next connection is a long cut, so
    a reader that retries always gets through; at most ``max_stalls`` stalls in all. ``counts`` tallies actions.

    >>> plan = FaultPlan({"pass": 1}, seed=1)
    >>> plan.choose()[0], plan.counts
    ('pass', {'pass': 1})
    """

    def __init__(self, weights: dict[str, float] | None = None, *, seed: int = 0,
                 cut_range: tuple[int, int] = (2000, 200_000), max_unproductive: int = 2, max_stalls: int = 2):
        self.weights = weights or {"pass": 1, "cut": 6, "reset": 1, "500": 1, "503": 1, "stall": 0.3}
        self.rng = random.Random(seed)
        self.cut_range, self.max_unproductive, self.max_stalls = cut_range, max_unproductive, max_stalls
        self.counts: dict[str, int] = {}
        self._unproductive = 0

    def choose(self) -> tuple[str, int, bool]:
        """``(action, cut offset, end the cut with RST?)``. A cut ended by RST may lose what the client had not
        read yet, so only passes and FIN-ended cuts count as progress."""
        actions = [a for a in self.weights if a != "stall" or self.counts.get("stall", 0) < self.max_stalls]
        action = self.rng.choices(actions, [self.weights[a] for a in actions])[0]
        cut, rst = self.rng.randint(*self.cut_range), self.rng.random() < 0.3
        if action != "pass" and self._unproductive >= self.max_unproductive:
            action, rst = "cut", False
        productive = action == "pass" or (action == "cut" and not rst)
        self._unproductive = 0 if productive else self._unproductive + 1
        self.counts[action] = self.counts.get(action, 0) + 1
        return action, cut, rst

    @property
    def faults(self) -> int:
        return sum(n for action, n in self.counts.items() if action != "pass")


class _Link:
    """The shared state: the link's next free time and the counters."""

    def __init__(self, loop: asyncio.AbstractEventLoop, args: argparse.Namespace):
        self.loop, self.delay = loop, args.delay_ms / 1000
        self.conn_rate, self.link_rate = args.conn_rate or None, args.link_rate or None
        self.upstream = (LOOPBACK, args.upstream)
        self.plan = FaultPlan(json.loads(args.faults), seed=args.seed, cut_range=tuple(args.cut_range),
                              max_stalls=args.max_stalls) if args.faults else None
        self.stall = args.stall
        self.handshake = args.handshake
        self.free = 0.0
        self.timeline: dict[str, int] = {}
        self.stats = {"connections": 0, "bytes_down": 0, "bytes_up": 0, "open": 0, "max_open": 0, "chunks_down": 0}


class _Pipe:
    """Things to do at given times, done in the order they were queued (a timer heap alone would not keep
    the order of equal times): the bytes of one direction of one connection, then its close."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop, self.items = loop, collections.deque()
        self.timer: asyncio.TimerHandle | None = None

    def push(self, when: float, action: Callable[[], None]) -> None:
        if self.items:
            when = max(when, self.items[-1][0])
        self.items.append((when, action))
        if self.timer is None:
            self.timer = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self.timer = None
        now = self.loop.time()
        while self.items and self.items[0][0] <= now:
            self.items.popleft()[1]()
        if self.items:
            self.timer = self.loop.call_at(self.items[0][0], self._fire)


class _Upstream(asyncio.Protocol):
    def __init__(self, conn: _Client):
        self.conn = conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.conn.upstream_ready(transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        self.conn.down(data)

    def eof_received(self) -> bool:
        self.conn.down_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.down_eof()


class _Client(asyncio.Protocol):
    """One client connection and its upstream twin."""

    def __init__(self, link: _Link):
        self.link, self.loop = link, link.loop
        self.client: asyncio.Transport | None = None
        self.upstream: asyncio.Transport | None = None
        self.pending_up: list[bytes] = []
        self.to_client, self.to_server = _Pipe(self.loop), _Pipe(self.loop)
        self.free = 0.0  # when this connection's share of the link is free again
        self.opened = self.loop.time()  # accepted (with a handshake: the first bytes up wait one RTT more)
        self.sent = 0
        self.last = 0.0  # delivery time of the last chunk scheduled
        self.ended = False
        self.paused_by_client = self.paused_by_backlog = False
        self.head = b""
        self.action, self.cut, self.rst = "pass", 0, False

    # -- client side -------------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.client = transport  # type: ignore[assignment]
        stats = self.link.stats
        stats["connections"] += 1
        stats["open"] += 1
        stats["max_open"] = max(stats["max_open"], stats["open"])
        if self.link.plan is not None:
            self.action, self.cut, self.rst = self.link.plan.choose()
        if self.action in ("pass", "cut"):
            self.loop.create_task(self._connect())

    async def _connect(self) -> None:
        try:
            await self.loop.create_connection(lambda: _Upstream(self), *self.link.upstream)
        except OSError:
            self._close_client()

    def upstream_ready(self, transport: asyncio.Transport) -> None:
        self.upstream = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.max_size = _READ_SIZE  # type: ignore[attr-defined]
        if self.client is None or self.client.is_closing():
            transport.close()
            return
        for data in self.pending_up:
            transport.write(data)
        self.pending_up = []

    def data_received(self, data: bytes) -> None:
        self.link.stats["bytes_up"] += len(data)
        if self.action not in ("pass", "cut"):
            self.head += data
            if b"\r\n\r\n" in self.head:
                self._misbehave()
            return
        when = self.loop.time() + self.link.delay
        if self.link.handshake:
            when = max(when, self.opened + 3 * self.link.delay)
        self.to_server.push(when, lambda: self._up(data))

    def _up(self, data: bytes) -> None:
        if self.upstream is None:
            self.pending_up.append(data)
        elif not self.upstream.is_closing():
            self.upstream.write(data)

    def eof_received(self) -> bool:
        self.to_server.push(self.loop.time() + self.link.delay, self._close_upstream)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self.link.stats["open"] -= 1
        self._close_upstream()

    def pause_writing(self) -> None:
        self.paused_by_client = True
        self._flow()

    def resume_writing(self) -> None:
        self.paused_by_client = False
        self._flow()

    # -- faults ------------------------------------------------------------------------------------------------
    def _misbehave(self) -> None:
        action, self.action = self.action, "done"
        if action in ("500", "503"):
            reason = "Internal Server Error" if action == "500" else "Service Unavailable"
            answer = f"HTTP/1.1 {action} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
            self.to_client.push(self.loop.time() + self.link.delay, lambda: self._send(answer))
            self.to_client.push(self.loop.time() + self.link.delay, self._close_client)
        elif action == "reset":
            self.loop.call_later(self.link.delay, self._reset)
        elif action == "stall":
            self.loop.call_later(self.link.stall, self._close_client)

    def _reset(self) -> None:
        if self.client is not None and not self.client.is_closing():
            sock = self.client.get_extra_info("socket")
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.client.abort()

    # -- answer side -------------------------------------------------------------------------------------------
    def down(self, data: bytes) -> None:
        if self.action == "cut":
            data = data[: max(0, self.cut - self.sent)]
            if len(data) == 0:
                return
        self.sent += len(data)
        link, now = self.link, self.loop.time()
        self.free = max(now, self.free) + (len(data) / link.conn_rate if link.conn_rate else 0.0)
        done = self.free
        if link.link_rate:
            link.free = max(now, link.free) + len(data) / link.link_rate
            done = max(done, link.free)
        self.last = max(self.last, done + link.delay)
        link.stats["bytes_down"] += len(data)
        link.stats["chunks_down"] += 1
        bucket = str(int(done * 10))  # bytes by the 100 ms in which they leave the link
        link.timeline[bucket] = link.timeline.get(bucket, 0) + len(data)
        self.to_client.push(self.last, lambda: self._send(data))
        if self.action == "cut" and self.sent >= self.cut:
            self.to_client.push(self.last, self._reset if self.rst else self._close_client)
            if self.upstream is not None:
                self.upstream.close()
            return
        self._flow()

    def _flow(self) -> None:
        """Pause upstream reading while the client does not read, or this connection's backlog is long."""
        backlog = self.free - self.loop.time()
        self.paused_by_backlog = backlog > _BACKLOG_S
        if self.upstream is None or self.upstream.is_closing():
            return
        if self.paused_by_client or self.paused_by_backlog:
            self.upstream.pause_reading()
            if self.paused_by_backlog:
                self.loop.call_later(backlog - _BACKLOG_S / 2, self._flow)
        else:
            self.upstream.resume_reading()

    def _send(self, data: bytes) -> None:
        if self.client is not None and not self.client.is_closing():
            self.client.write(data)

    def down_eof(self) -> None:
        if self.action == "cut" and self.sent >= self.cut:
            return
        self.to_client.push(max(self.last, self.loop.time() + self.link.delay), self._close_client)

    def _close_client(self) -> None:
        if self.client is not None and not self.client.is_closing():
            self.client.close()
        self._close_upstream()

    def _close_upstream(self) -> None:
        if self.upstream is not None and not self.upstream.is_closing():
            self.upstream.close()


async def _serve(args: argparse.Namespace) -> dict:
    loop = asyncio.get_running_loop()
    link = _Link(loop, args)
    server = await loop.create_server(lambda: _Client(link), LOOPBACK, args.port, backlog=256)
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    done = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    parent = os.getppid()

    def orphaned() -> None:  # the process that started it is gone (killed): stop too
        if os.getppid() != parent:
            done.set()
        else:
            loop.call_later(1.0, orphaned)

    loop.call_later(1.0, orphaned)
    await done.wait()
    server.close()
    return {**link.stats, "counts": link.plan.counts if link.plan else {}, "cpu_s": round(time.process_time(), 3),
            "timeline": link.timeline}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--upstream", type=int, required=True, help="port of the server on 127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one, printed)")
    p.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay in ms (RTT = 2 x this)")
    p.add_argument("--conn-rate", type=float, default=0.0, help="bytes/s per connection (0: no cap)")
    p.add_argument("--link-rate", type=float, default=0.0, help="bytes/s for all connections (0: no cap)")
    p.add_argument("--faults", default="", help='JSON weights, e.g. {"pass": 1, "cut": 4} (default: none)')
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cut-range", type=int, nargs=2, default=(2000, 200_000))
    p.add_argument("--stall", type=float, default=1.5, help="seconds a stalled connection is held")
    p.add_argument("--max-stalls", type=int, default=2)
    p.add_argument("--handshake", action="store_true", help="a new connection costs one RTT before its request")
    return p


class LinkEmulator:
    """The emulator in a child process in front of ``127.0.0.1:upstream_port`` (see the module docstring).

    ``delay`` is one-way, in seconds (``handshake``: a new connection's first request costs one RTT more);
    ``conn_rate``/``link_rate`` in bytes/s (None: no cap); ``faults`` the weights of a :class:`FaultPlan` (None:
    no faults). ``url(path)`` gives an http URL through it; ``stop()`` returns the counters: ``connections``,
    ``bytes_down``, ``bytes_up`` and ``counts`` (fault actions).
    """

    def __init__(self, upstream_port: int, *, delay: float = 0.0, conn_rate: float | None = None,
                 link_rate: float | None = None, faults: dict[str, float] | None = None, seed: int = 0,
                 cut_range: tuple[int, int] = (2000, 200_000), stall: float = 1.5, max_stalls: int = 2,
                 handshake: bool = False):
        cmd = [sys.executable, os.path.abspath(__file__), "--upstream", str(upstream_port),
               "--delay-ms", str(delay * 1000), "--conn-rate", str(conn_rate or 0),
               "--link-rate", str(link_rate or 0), "--seed", str(seed), "--cut-range", *map(str, cut_range),
               "--stall", str(stall), "--max-stalls", str(max_stalls)]
        if faults:
            cmd += ["--faults", json.dumps(faults)]
        if handshake:
            cmd.append("--handshake")
        self.delay, self.conn_rate, self.link_rate = delay, conn_rate, link_rate
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line.strip().isdigit():
            self.proc.kill()
            raise RuntimeError(f"the link emulator did not start (exit status {self.proc.wait()})")
        self.port = int(line)
        self.stats: dict | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def url(self, path: str = "") -> str:
        return f"{self.endpoint}/{path.lstrip('/')}"

    def stop(self) -> dict:
        if self.stats is None:
            self.proc.send_signal(signal.SIGTERM)
            out, _ = self.proc.communicate(timeout=10)
            self.stats = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        return self.stats

    def __enter__(self) -> LinkEmulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> int:
    args = _parser().parse_args()
    stats = asyncio.run(_serve(args))
    print(json.dumps(stats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
