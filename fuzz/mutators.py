"""Structure-aware mutations of shardstream's inputs: tar archives, sidecar indexes, dataset indexes, fields.

A plain bit-flipper rarely gets past a tar header's checksum; these mutators know the formats. A tar mutation
rewrites a header field (size, typeflag, name, magic) and usually fixes the checksum so the reader goes
deeper, inserts PAX or GNU long-name headers with hostile records, truncates at and between blocks, deletes,
repeats or splices blocks, or flips bytes. Every mutator is ``(rng, data) -> data`` and deterministic given
the ``random.Random``.
"""

from __future__ import annotations

import json
import random
import struct

BLOCK = 512
SIZES = [0, 1, 511, 512, 513, 1 << 20, (1 << 33) - 1, 1 << 40, 1 << 47, (1 << 48) + 1]
TYPEFLAGS = b"0\x00125467LKxgSVDM"
NAMES = [b"", b".", b"..", b"a", b"a.txt", b"a.b.c.d", b"x/../y.txt", b"/etc/passwd.txt", b"k.__url__",
         b"k.__key__", b"k.", b".hidden", "\u00e9t\u00e9.jpg".encode(), b"\xff\xfe.bin", b"a" * 99 + b".x",
         b"dir/", b"a\x00b.txt", b"A.TXT", b"a.txt"]  # fmt: skip
PAX = [b"path=x.txt", b"size=0", b"size=99999999999999999999", b"size=-1", b"size=abc", b"size=", b"path=",
       b"path=a\x00b.txt", b"GNU.sparse.major=1", b"mtime=1.5", b"linkpath=zz", b"path=k.__url__",
       b"size=1048577"]  # fmt: skip


def checksum(header: bytearray) -> None:
    """Write a valid checksum into a 512-byte header."""
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\x00 " % sum(header)


def octal(value: int, width: int) -> bytes:
    """``value`` as a tar numeric field of ``width`` bytes: octal when it fits, else GNU base-256."""
    text = b"%0*o\x00" % (width - 1, value)
    if len(text) == width:
        return text
    return bytes([0x80]) + value.to_bytes(width - 1, "big", signed=False)[-(width - 1):]


def header_offsets(data: bytes) -> list[int]:
    """Offsets of the headers a well-formed reading of ``data`` would visit (best effort, never raises)."""
    offsets, pos = [], 0
    while pos + BLOCK <= len(data) and data[pos:pos + BLOCK] != bytes(BLOCK):
        offsets.append(pos)
        field = data[pos + 124:pos + 136]
        try:
            size = int(field.strip(b" \x00") or b"0", 8)
        except ValueError:
            break
        typeflag = data[pos + 156:pos + 157]
        size = 0 if typeflag in (b"1", b"2", b"3", b"4", b"5", b"6") else size
        pos += BLOCK + (size + BLOCK - 1) // BLOCK * BLOCK
    return offsets


def _header(name: bytes, size: int, typeflag: bytes = b"0") -> bytearray:
    h = bytearray(BLOCK)
    h[0:len(name[:100])] = name[:100]
    h[100:108], h[108:116], h[116:124] = b"0000644\x00", b"0000000\x00", b"0000000\x00"
    h[124:136], h[136:148] = octal(size, 12), b"00000000000\x00"
    h[156:157], h[257:265] = typeflag, b"ustar\x0000"
    checksum(h)
    return h


def _padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % BLOCK)


def _pax_records(rng: random.Random) -> bytes:
    out = b""
    for _ in range(rng.randint(1, 3)):
        body = rng.choice(PAX)
        record = b" " + body + b"\n"
        length = len(record) + len(str(len(record) + 2))
        text = b"%d" % length + record
        roll = rng.random()
        if roll < 0.15:
            text = b"%d" % rng.choice([0, 1, 5, length + 7, 10**12]) + record
        elif roll < 0.2:
            text = text[:-1]  # no newline
        out += text
    return out


def mutate_tar(rng: random.Random, data: bytes, others: list[bytes]) -> bytes:
    buf = bytearray(data)
    offsets = header_offsets(data) or [0]
    for _ in range(rng.randint(1, 4)):
        at = rng.choice(offsets)
        if at + BLOCK > len(buf):
            buf += bytes(at + BLOCK - len(buf))
        head = bytearray(buf[at:at + BLOCK])
        roll = rng.randrange(14)
        if roll == 0:
            size = rng.choice(SIZES) + (rng.randint(-3, 3) if rng.random() < 0.3 else 0)
            head[124:136] = octal(max(0, size), 12) if rng.random() < 0.9 else b"\xff" * 12
        elif roll == 1:
            head[156:157] = bytes([rng.choice(TYPEFLAGS) if rng.random() < 0.9 else rng.randrange(256)])
        elif roll == 2:
            name = rng.choice(NAMES)
            head[0:100] = name[:100].ljust(100, b"\0")
            if rng.random() < 0.3:
                head[345:500] = (rng.choice(NAMES) * 3)[:155].ljust(155, b"\0")  # ustar prefix
        elif roll == 3:
            head[257:265] = rng.choice([b"ustar\x0000", b"ustar  \x00", b"\x00" * 8, b"garbage!"])
        elif roll == 4:
            head[148:156] = rng.choice([b"0000000\x00", b"        ", b"9999999\x00", bytes(8)])
        if roll <= 3 and rng.random() < 0.85:
            checksum(head)
        if roll <= 4:
            buf[at:at + BLOCK] = head
        elif roll == 5:  # a PAX header before this member
            records = _pax_records(rng)
            buf[at:at] = _header(b"PaxHeaders/x", len(records), rng.choice([b"x", b"g"])) + _padded(records)
        elif roll == 6:  # a GNU long name before this member
            name = rng.choice(NAMES) * rng.randint(1, 40) + (b"\0" if rng.random() < 0.7 else b"")
            buf[at:at] = _header(b"././@LongLink", len(name), b"L") + _padded(name)
        elif roll == 7:
            del buf[rng.randrange(len(buf) + 1):]
        elif roll == 8:
            cut = rng.randrange(len(buf) // BLOCK + 1) * BLOCK
            del buf[cut + rng.choice([0, 0, 1, 100, 511]):]
        elif roll == 9 and len(buf) >= BLOCK:
            block = rng.randrange(len(buf) // BLOCK) * BLOCK
            if rng.random() < 0.5:
                del buf[block:block + BLOCK]
            else:
                buf[block:block] = buf[block:block + BLOCK]
        elif roll == 10:
            buf[at:at] = bytes(BLOCK * rng.randint(1, 2))
        elif roll == 11 and others:
            other = rng.choice(others)
            start = rng.randrange(len(other) // BLOCK + 1) * BLOCK
            buf[at:at] = other[start:start + BLOCK * rng.randint(1, 4)]
        elif roll == 12:
            buf += rng.randbytes(rng.randint(1, 700))
        else:
            buf = bytearray(flip(rng, bytes(buf)))
    return bytes(buf)


def flip(rng: random.Random, data: bytes) -> bytes:
    """A few random bytes replaced, inserted or deleted."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not buf:
            buf += rng.randbytes(4)
        at = rng.randrange(len(buf))
        roll = rng.random()
        if roll < 0.6:
            buf[at] = rng.randrange(256)
        elif roll < 0.8:
            buf[at:at] = rng.randbytes(rng.randint(1, 8))
        else:
            del buf[at:at + rng.randint(1, 8)]
    return bytes(buf)


def mutate_sidecar(rng: random.Random, data: bytes) -> bytes:
    """A sidecar index with its JSON header or arrays changed (header length kept consistent)."""
    if len(data) < 12 or rng.random() < 0.25:
        return flip(rng, data)
    (length,) = struct.unpack_from("<I", data, 8)
    try:
        header = json.loads(data[12:12 + length])
    except ValueError:
        return flip(rng, data)
    arrays = bytearray(data[12 + length:])
    if rng.random() < 0.5 and isinstance(header, dict):
        key = rng.choice(["samples", "members", "size", "extensions", "rule", "lowercase", "fingerprint"])
        header[key] = rng.choice([-1, 0, 1, 2**31, 2**32, 2**64, None, "x", [], ["a"] * 3, True, 1.5])
    elif arrays:
        at = rng.randrange(len(arrays))
        arrays[at:at + 8] = rng.choice([bytes(8), b"\xff" * 8, struct.pack("<Q", rng.randrange(1 << 20))])
    if rng.random() < 0.2:
        del arrays[rng.randrange(len(arrays) + 1):]
    text = json.dumps(header).encode()
    text += b" " * (-(12 + len(text)) % 8)
    return data[:8] + struct.pack("<I", len(text)) + text + bytes(arrays)


def mutate_json(rng: random.Random, data: bytes) -> bytes:
    """A JSON document with one value somewhere replaced by a hostile one."""
    try:
        doc = json.loads(data)
    except ValueError:
        return flip(rng, data)
    values = [[], None, -1, 0, 2**70, "", "pipe:touch /tmp/shardstream-fuzz", "x" * 300, {}, 1.5, True,
              [[[]]], "../../etc/passwd"]  # fmt: skip
    if rng.random() < 0.1:
        return json.dumps(rng.choice(values)).encode()

    def walk(node: object) -> object:
        if isinstance(node, dict) and node and rng.random() < 0.7:
            key = rng.choice(list(node))
            node[key] = walk(node[key]) if rng.random() < 0.6 else rng.choice(values)
            if rng.random() < 0.1:
                del node[key]
        elif isinstance(node, list) and node and rng.random() < 0.7:
            i = rng.randrange(len(node))
            node[i] = walk(node[i]) if rng.random() < 0.6 else rng.choice(values)
        return node

    out = json.dumps(walk(doc)).encode()
    return flip(rng, out) if rng.random() < 0.2 else out


def mutate_field(rng: random.Random, data: bytes) -> bytes:
    """Field bytes: flips, truncation, or (for .npy) a rewritten header."""
    if data[:6] == b"\x93NUMPY" and rng.random() < 0.5:
        shape = tuple(rng.choice([0, 1, 3, 2**31, 2**40, -1]) for _ in range(rng.randint(0, 3)))
        descr = rng.choice(["<f8", "|u1", "<i4", "|O", "<U5", "V8", "<c16"])
        header = repr({"descr": descr, "fortran_order": rng.random() < 0.2, "shape": shape}).encode()
        header += b" " * (-(10 + len(header) + 1) % 64) + b"\n"
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data[-rng.randint(0, 64):]
    if rng.random() < 0.3:
        return data[:rng.randrange(len(data) + 1)]
    return flip(rng, data)
