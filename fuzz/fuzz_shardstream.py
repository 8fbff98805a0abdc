"""Fuzz shardstream's parsers: tar (C and Python paths, streamed, mapped, short reads, compressed), sample
grouping, decoders, sidecar and dataset indexes, dataset specs, resumable states, stream files, TFRecord files and
HTTP answers. Bounded by time; findings are saved and make it exit 1.

    python fuzz/fuzz_shardstream.py --seconds 60              # structure-aware mutator (always available)
    python fuzz/fuzz_shardstream.py --targets spec,state -s 60  # some kinds only (default: all)
    python fuzz/fuzz_shardstream.py --engine atheris -s 600   # coverage-guided, where atheris installs
    python fuzz/fuzz_shardstream.py --make-corpus             # rewrite fuzz/corpus/ (small seeds, checked in)

``make fuzz`` runs it (``FUZZ_SECONDS``, default 60). Every input is one of the kinds below (its seed's file name
prefix in the corpus): ``tar-*`` archives, ``ssidx-*`` sidecar indexes, ``dsindex-*.json`` dataset indexes,
``field-*.EXT`` field bytes decoded by extension (``targets.py``); ``spec-*.yaml|json`` dataset specs
(``target_spec.py``); ``state`` resumable states, whose seeds are the genuine states of small pipelines made when
the run starts (``target_state.py``); ``stream-*.msgpack|cbors|jsonl`` stream files and ``tfrecord-*`` TFRecord
files (``target_records.py``); ``http-*.json`` the answers of an HTTP server (``target_http.py``). Each target
says which errors it allows; anything else is a finding. The process runs with a 4 GiB address-space limit, so
a memory blowup is a finding, not a crash of the machine; each input has a budget of CPU time (``BUDGETS``, 3 to
10 s) and of wall-clock time, so a hang is one too. ``--inputs N`` with ``--seed`` runs the same inputs on any
machine (the suite's runs do).

A finding that ``known.py`` lists (a bug another branch fixes) is saved and printed as known and does not fail
the run; ``--strict`` counts it too.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import random
import resource
import signal
import sys
import time
import traceback
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
KINDS = {"tar": 0.36, "field": 0.12, "ssidx": 0.06, "dsindex": 0.06, "spec": 0.1, "state": 0.1, "stream": 0.08,
         "tfrecord": 0.05, "http": 0.07}  # fmt: skip
GENERATED = ("state",)  # kinds whose seeds are made when the run starts, not read from the corpus
ALARM_SECONDS = 10
#: CPU seconds an input may take, by kind (else ALARM_SECONDS); WALL_SECONDS of wall-clock time catch a blocked one
BUDGETS = {"spec": 3, "http": 3, "state": 5, "stream": 5, "tfrecord": 5}
WALL_SECONDS = 120


class Hang(BaseException):
    """An input ran past the alarm."""


def _on_alarm(signum: int, frame: object) -> None:
    what = "CPU time budget (fuzz_shardstream.BUDGETS)" if signum == signal.SIGPROF else f"{WALL_SECONDS} s"
    raise Hang(f"an input ran past its {what}")


def _arm(seconds: float) -> None:
    """Budget the next input: ``seconds`` of CPU time (a loaded machine does not make a slow input a hang) and
    ``WALL_SECONDS`` of wall-clock time (an input blocked on something); 0 disarms both."""
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.alarm(WALL_SECONDS if seconds else 0)


def make_corpus(directory: pathlib.Path) -> None:
    """Small seeds covering the formats' features, written deterministically."""
    import gzip
    import io
    import json

    import numpy as np

    from shardstream.codecs import encode_image, tenbin
    from shardstream.codecs.arrays import npy_dumps, npz_dumps
    from shardstream.indexed import index_dataset, index_shard
    from shardstream.tar import TarStreamWriter

    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.iterdir():
        old.unlink()

    def trimmed(data: bytes, end: bool = True) -> bytes:
        """Without the record padding (only the two end blocks, or none: an unterminated archive)."""
        from mutators import header_offsets

        last = header_offsets(data)[-1]
        size = int(data[last + 124:last + 136].strip(b" \0") or b"0", 8)
        stop = last + 512 + -(-size // 512) * 512
        return data[:stop + (1024 if end else 0)]

    def tar(name: str, members: list[tuple[str, bytes]], end: bool = True) -> bytes:
        out = io.BytesIO()
        with TarStreamWriter(out) as writer:
            for member, data in members:
                writer.add(member, data)
        (directory / f"tar-{name}.tar").write_bytes(trimmed(out.getvalue(), end))
        return out.getvalue()

    tar("plain", [("a.txt", b"hello"), ("a.cls", b"3"), ("b.txt", b"x" * 600), ("b.cls", b"4")])
    tar("longname", [("d/" * 70 + "k.txt", b"long"), ("d/" * 70 + "k.json", b"{}"), ("\u00e9.txt", b"e")])
    tar("empty-members", [("a.txt", b""), ("a.bin", b""), ("b.txt", b"1")])
    tar("unterminated", [("a.txt", b"x"), ("a.cls", b"1")], end=False)
    plain = tar("dotted", [("a.b.c.txt", b"1"), ("A.TXT", b"2"), ("x.seg.png", b"3")])
    import tarfile

    out = io.BytesIO()  # GNU long names, a directory, a symlink and a global PAX header, as GNU tar writes them
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, data in (("g/" * 60 + "x.txt", b"gnu"), ("y.txt", b"y")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("dir")
        info.type = tarfile.DIRTYPE
        tf.addfile(info)
        info = tarfile.TarInfo("link.txt")
        info.type, info.linkname = tarfile.SYMTYPE, "y.txt"
        tf.addfile(info)
    (directory / "tar-gnu.tar").write_bytes(trimmed(out.getvalue()))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": "g"}) as tf:
        info = tarfile.TarInfo("p.txt")
        info.size, info.pax_headers = 3, {"path": "q.txt"}
        tf.addfile(info, io.BytesIO(b"pax"))
    (directory / "tar-pax.tar").write_bytes(trimmed(out.getvalue()))
    shard = directory / "tar-plain.tar"
    index = index_shard(str(shard), save=False)
    (directory / "ssidx-plain.ssidx").write_bytes(index.to_bytes())
    dotted = index_shard(str(directory / "tar-dotted.tar"), save=False)
    (directory / "ssidx-dotted.ssidx").write_bytes(dotted.to_bytes())
    ds = index_dataset([str(shard)], str(directory / "dsindex-plain.json"))
    doc = json.loads((directory / "dsindex-plain.json").read_text())
    doc["shards"][0]["url"], doc["shards"][0]["index"] = "tar-plain.tar", "ssidx-plain.ssidx"
    (directory / "dsindex-plain.json").write_text(json.dumps(doc))
    (directory / "tar-plain.tar.ssidx").unlink(missing_ok=True)
    del ds, plain
    image = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    fields = {
        "json": b'{"a": [1, 2.5, "x"], "b": null}', "cls": b"7", "txt": "caf\u00e9".encode(),
        "npy": npy_dumps(np.arange(6, dtype="<i4").reshape(2, 3)), "npz": npz_dumps({"a": np.zeros(3)}),
        "json.gz": gzip.compress(b"[1, 2, 3]", mtime=0), "png": encode_image(image, "png"),
        "jpg": encode_image(image, "jpg"), "webp": encode_image(image, "webp"), "bmp": encode_image(image, "bmp"),
        "gif": encode_image(image[..., 0], "gif"), "tiff": encode_image(image, "tiff"),
        "msgpack": b"\x82\xa1a\x01\xa1b\x92\x01\x02", "cbor": b"\xa2aa\x01ab\x82\x01\x02",
        "ten": tenbin.encode_buffer([np.ones(3)]),
    }  # fmt: skip
    for ext, data in fields.items():
        (directory / f"field-{ext.replace('.', '_')}.{ext}").write_bytes(data)
    import target_http
    import target_records
    import target_spec

    for module in (target_spec, target_records, target_http):
        for name, data in module.corpus_seeds().items():
            (directory / name).write_bytes(data)


def load_corpus(directory: pathlib.Path, kinds: list[str] | None = None) -> dict[str, list[tuple[str, bytes]]]:
    """The seeds of each kind (``kinds``: those only): the corpus's files, and the generated ones."""
    corpus: dict[str, list[tuple[str, bytes]]] = {kind: [] for kind in kinds or KINDS}
    for path in sorted(directory.iterdir()):
        kind = path.name.split("-", 1)[0]
        if kind in corpus and kind not in GENERATED:
            corpus[kind].append((path.name, path.read_bytes()))
    if "state" in corpus:
        import target_state

        corpus["state"] = target_state.seeds()
    missing = [kind for kind, seeds in corpus.items() if not seeds]
    if missing:
        raise SystemExit(f"no seeds for {missing} in {directory}: run with --make-corpus")
    return corpus


#: kind -> (module, checking function, mutating function); a checker takes ``(name, data, rng)`` or ``(data,
#: rng)`` as its kind needs, a mutator ``(rng, data)`` plus the tar pool or the seed name (see ``one``, ``mutate``)
TARGETS = {
    "tar": ("targets", "check_tar", "mutators.mutate_tar"), "field": ("targets", "check_field", "mutators.mutate_field"),
    "ssidx": ("targets", "check_sidecar", "mutators.mutate_sidecar"),
    "dsindex": ("targets", "check_dataset_index", "mutators.mutate_json"),
    "spec": ("target_spec", "check_spec", "target_spec.mutate_spec"),
    "state": ("target_state", "check_state", "target_state.mutate_state"),
    "stream": ("target_records", "check_stream", "target_records.mutate_stream"),
    "tfrecord": ("target_records", "check_tfrecord", "target_records.mutate_tfrecord"),
    "http": ("target_http", "check_http", "target_http.mutate_http"),
}  # fmt: skip


def _function(dotted: str) -> Any:
    import importlib

    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def one(kind: str, name: str, data: bytes, rng: random.Random) -> None:
    """Feed one (already mutated) input to its target (importing only that target's module)."""
    module, check, _ = TARGETS[kind]
    function = _function(f"{module}.{check}")
    if kind == "field":
        function(name.split(".", 1)[1], data, rng)
    elif kind in ("spec", "state", "stream"):
        function(name, data, rng)
    else:
        function(data, rng)


def mutate(kind: str, data: bytes, rng: random.Random, pool: list[bytes], name: str = "") -> bytes:
    function = _function(TARGETS[kind][2])
    if kind == "tar":
        return function(rng, data, pool)
    if kind in ("spec", "stream"):
        return function(rng, data, name)
    return function(rng, data)


def run(seconds: float, seed: int, corpus_dir: pathlib.Path = CORPUS, findings: pathlib.Path | None = None,
        *, alarm: bool = True, kinds: list[str] | None = None, strict: bool = False,
        inputs: int | None = None) -> dict:
    """Fuzz ``kinds`` (default: all) for ``seconds`` or ``inputs`` inputs, whichever ends first; returns
    ``{"inputs": {kind: n}, "findings": [...], "known": [...]}`` (``strict``: known findings go to ``findings``
    too). A seed and a number of inputs make a run the same on any machine. ``alarm=False``: no per-input budget
    (in a process whose SIGALRM belongs to someone else, such as pytest-timeout)."""
    import known
    import targets

    kinds = list(kinds or KINDS)
    corpus = load_corpus(corpus_dir, kinds)
    for kind in kinds:  # import what the targets use before the clock starts
        _function(f"{TARGETS[kind][0]}.{TARGETS[kind][1]}")
        _function(TARGETS[kind][2])
    rng = random.Random(seed)
    pools = {kind: [data for _, data in seeds] for kind, seeds in corpus.items()}
    counts = {kind: 0 for kind in kinds}
    found: list[str] = []
    expected: list[str] = []
    if alarm:
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.signal(signal.SIGPROF, _on_alarm)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (inputs is None or sum(counts.values()) < inputs):
        kind = rng.choices(kinds, weights=[KINDS[k] for k in kinds])[0]
        name, data = rng.choice(corpus[kind])
        if kind == "tar" and rng.random() < 0.5:
            data = rng.choice(pools["tar"])
        data = mutate(kind, data, rng, pools.get("tar", []), name)
        if alarm:
            _arm(BUDGETS.get(kind, ALARM_SECONDS))
        try:
            one(kind, name, data, rng)
            if kind == "tar" and len(pools["tar"]) < 400 and rng.random() < 0.05:
                pools["tar"].append(data)  # mutants breed: deeper mutations over time
        except (targets.Finding, Hang, Exception) as e:
            if alarm:
                _arm(0)
            entry = known.classify(kind, e)
            text = _record(kind, name, data, e, findings, entry)
            (found if entry is None or strict else expected).append(text)
        finally:
            if alarm:
                _arm(0)
        counts[kind] += 1
    return {"inputs": counts, "findings": found, "known": expected}


def _record(kind: str, name: str, data: bytes, error: BaseException, directory: pathlib.Path | None,
            entry: object = None) -> str:
    import known

    digest = hashlib.sha1(data).hexdigest()[:12]
    text = f"{kind} from {name} ({len(data)} bytes, sha1 {digest}): {known.signature(error)}"
    if entry is not None:
        text = f"known ({entry}): {text}"
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        suffix = name.split(".", 1)[1] if kind in ("field", "stream", "spec") else kind
        prefix = "known-" if entry is not None else ""
        (directory / f"{prefix}{kind}-{digest}.{suffix}").write_bytes(data)
        (directory / f"{prefix}{kind}-{digest}.txt").write_text(
            f"{text}\nseed: {name}\n\n" + "".join(traceback.format_exception(error)))
    return text


def run_atheris(seconds: float, corpus_dir: pathlib.Path, kinds: list[str] | None = None,
                strict: bool = False) -> None:  # pragma: no cover - needs atheris
    """Coverage-guided over the pure-Python code (atheris instruments it), with the structure-aware mutators."""
    import atheris

    with atheris.instrument_imports(include=["shardstream"]):
        import target_http  # noqa: F401  (and through these every shardstream module they feed)
        import target_records  # noqa: F401
        import target_spec  # noqa: F401
        import target_state  # noqa: F401
        import targets  # noqa: F401
    import known

    kinds = list(kinds or KINDS)
    corpus = load_corpus(corpus_dir, kinds)

    def test_one_input(raw: bytes) -> None:
        if not raw:
            return
        kind = kinds[raw[0] % len(kinds)]
        name = corpus[kind][raw[0] // len(kinds) % len(corpus[kind])][0]
        try:
            one(kind, name, raw[1:], random.Random(raw[:8]))
        except Exception as e:
            if strict or known.classify(kind, e) is None:
                raise

    def custom_mutator(raw: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        if len(raw) < 2 or rng.random() < 0.1:
            kind = rng.choice(kinds)
            index = rng.randrange(len(corpus[kind]))
            tag, raw = kinds.index(kind) + len(kinds) * index, b"\x00" + corpus[kind][index][1]
        else:
            tag = raw[0]
        kind = kinds[tag % len(kinds)]
        name = corpus[kind][tag // len(kinds) % len(corpus[kind])][0]
        return (bytes([tag % 256]) + mutate(kind, raw[1:], rng, [], name))[:max_size]

    atheris.Setup([sys.argv[0], f"-max_total_time={int(seconds)}", f"-timeout={ALARM_SECONDS}", "-rss_limit_mb=4096",
                   "-max_len=65536"],
                  test_one_input, custom_mutator=custom_mutator)
    atheris.Fuzz()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-s", "--seconds", type=float, default=float(os.environ.get("FUZZ_SECONDS", 60)))
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock)")
    parser.add_argument("--engine", choices=("auto", "mutator", "atheris"), default="mutator")
    parser.add_argument("--targets", default="", help=f"comma-separated kinds (default: all of {','.join(KINDS)})")
    parser.add_argument("--strict", action="store_true", help="known findings (known.py) fail the run too")
    parser.add_argument("--inputs", type=int, default=None, help="stop after this many inputs (with --seed: the "
                        "same inputs on any machine, however loaded)")
    parser.add_argument("--corpus", type=pathlib.Path, default=CORPUS)
    parser.add_argument("--findings", type=pathlib.Path, default=HERE / "findings")
    parser.add_argument("--make-corpus", action="store_true", help="rewrite the seed corpus and exit")
    args = parser.parse_args(argv)
    kinds = [k for k in args.targets.split(",") if k] or list(KINDS)
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"unknown targets {unknown}; the kinds are {', '.join(KINDS)}")
    os.environ.setdefault("SHARDSTREAM_MAX_DECODED_BYTES", "64M")  # keep each decode small: a bomb is refused
    os.environ.setdefault("SHARDSTREAM_MAX_IMAGE_PIXELS", "16000000")
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))
    if args.make_corpus:
        make_corpus(args.corpus)
        print(f"wrote {len(list(args.corpus.iterdir()))} seeds to {args.corpus}")
        return 0
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401

            engine = "atheris"
        except ImportError:
            engine = "mutator"
    if engine == "atheris":  # pragma: no cover
        run_atheris(args.seconds, args.corpus, kinds, args.strict)
        return 0
    seed = args.seed if args.seed is not None else int(time.time())
    start = time.monotonic()
    result = run(args.seconds, seed, args.corpus, args.findings, kinds=kinds, strict=args.strict, inputs=args.inputs)
    total = sum(result["inputs"].values())
    by_kind = ", ".join(f"{kind} {n}" for kind, n in result["inputs"].items())
    print(f"fuzzed {total} inputs in {time.monotonic() - start:.1f} s (seed {seed}): {by_kind}; "
          f"{len(result['findings'])} findings, {len(result['known'])} known")
    for line in _classes(result["findings"] + result["known"])[:40]:
        print("  " + line)
    if result["findings"] or result["known"]:
        print(f"inputs and tracebacks in {args.findings}")
    return 1 if result["findings"] else 0


def _classes(lines: list[str]) -> list[str]:
    """One line per class of findings (same kind and signature, numbers aside), with how many inputs had it."""
    import re

    classes: dict[str, list[str]] = {}
    for line in lines:
        head, _, sig = line.partition(" bytes, sha1 ")
        label = head.split(" from ")[0]  # "known (...): KIND" or "KIND"
        classes.setdefault(label + ": " + re.sub(r"\d+", "N", sig.partition("): ")[2])[:200], []).append(line)
    return [f"{len(found)} x {found[0].splitlines()[0][:300]}" for found in sorted(classes.values(), key=len,
                                                                                  reverse=True)]


if __name__ == "__main__":
    sys.exit(main())
