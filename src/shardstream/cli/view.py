"""``shardstream view``: thumb through the samples of a dataset in a web browser.

Starts a local web server (127.0.0.1, a free port unless ``--port``) and prints its URL; ``--open`` also opens
it in a browser. The page shows a grid of thumbnails with paging, a jump to a sample number or key, a random
sample and a filter by extension; clicking a sample shows every field (images, text, JSON, class labels with the
names of ``classes.txt`` beside the shards, audio, arrays). Ctrl-C stops the server.

DATASET is what every command reads: shard paths or URLs, brace patterns (``'train-{000..009}.tar'``), globs,
a directory of shards, a dataset spec (``.yaml``), or a dataset index (``.json``, from ``shardstream index -o``).
Shards are opened for random access: a sidecar index beside a shard is used when it is fresh, otherwise the
headers are scanned into an index in memory (nothing is written beside your data). Remote shards are downloaded
once into the shard cache (``--cache-dir``, default ``SHARDSTREAM_CACHE_DIR``, else a temporary directory removed
when the viewer stops).

The page marks broken samples (a field that does not decode, a field most samples have but this one lacks,
an odd size) and can show only those; it has a statistics page (labels, field presence and sizes, image
sizes), a sortable table of every sample's scalar values, filters (key substring, class, ``name OP value``),
and draws boxes and points from COCO- or YOLO-like JSON over the image. These cover the first
``--scan-limit`` samples (read once, when first needed). ``--decode SPEC`` and ``--transform module:func``
show what the training pipeline makes of a sample beside its stored fields: ``func`` is imported from the
module you name (the current directory first) and called on the (decoded) sample; arrays and tensors are
shown as images with their value range, or as statistics and heat maps. The viewer runs no code named by
the data.

The server answers only for what the dataset contains (samples by number, fields by extension), to requests
for 127.0.0.1 or localhost; ``--host 0.0.0.0`` serves other machines too (anyone who reaches the port sees
the data). ``--check`` starts the server, requests the page, the dataset and its first sample, and exits.
"""

from __future__ import annotations

import argparse
import webbrowser
from typing import Any

from ..errors import ConfigError
from ..redact import redacting_logger
from ..viewer import ViewerData, ViewerServer, self_test
from ..viewer.transform import TransformedView, load_function
from ._common import key_rule, message, plural
from ._inputs import resolve_inputs
from ._options import add_inputs, command, examples

__all__ = ["register", "run"]

log = redacting_logger(__name__)

EXAMPLES = examples(
    "shardstream view dataset.tar --check",
    "shardstream view 'shards-{000000..000003}.tar' --check --port 0",
    "shardstream view dataset.tar --decode rgb --check",
    note="Without --check the viewer runs until Ctrl-C: shardstream view shards-*.tar --open",
)


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "view", "thumb through a dataset in a web browser", __doc__, EXAMPLES)
    add_inputs(p, metavar="DATASET")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: a free port)")
    p.add_argument("--open", action="store_true", help="open the page in a web browser")
    p.add_argument("--cache-dir", metavar="DIR", help="where remote shards are downloaded (SHARDSTREAM_CACHE_DIR)")
    p.add_argument("--classes", metavar="FILE", help="class names, one per line (default: classes.txt beside "
                                                     "the shards)")
    p.add_argument("--check", action="store_true", help="start, serve a few test requests, print what they "
                                                        "returned, and exit (for scripts and tests)")
    p.add_argument("--decode", metavar="SPEC", help="decode samples as the pipeline would (an image spec: rgb, "
                                                     "torchrgb, pil, l...) and show the result beside the fields")
    p.add_argument("--transform", metavar="MODULE:FUNC", help="call FUNC (imported from MODULE: your code) on each "
                                                             "shown sample (after --decode) and show what it returns")
    p.add_argument("--scan-limit", type=int, default=20000, metavar="N",
                   help="samples read for statistics, the table, filters and problem marks (default 20000)")
    p.add_argument("--allow-commands", action="store_true", help="let a dataset index name pipe:CMD shards "
                                                                 "(runs shell commands: trusted files only)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port < 65536:
        raise ConfigError(f"--port {args.port} is not a port number (0-65535; 0 picks a free port)")
    transformed = None
    if args.decode or args.transform:
        transformed = TransformedView(args.decode, load_function(args.transform) if args.transform else None)
    rule = key_rule(args, lowercase=True)
    inputs = resolve_inputs(args.inputs, keep_indexes=True)
    data = ViewerData(inputs, cache_dir=args.cache_dir, classes=args.classes,
                      rule=None if rule.rule in (None, "first-dot") else rule, allow_commands=args.allow_commands)  # fmt: skip
    try:
        for problem in data.problems:
            log.warning("%s", " ".join(problem.split()))
        server = ViewerServer(data, args.host, args.port, transformed=transformed,
                              scan_limit=args.scan_limit)
        try:
            if args.check:
                print(f"{server.url} ok: {self_test(server)}")
                return 0
            print(server.url, flush=True)
            message(args, f"viewing {plural(len(data), 'sample')} of {plural(len(data.shards), 'shard')}; "
                          "Ctrl-C stops the server")  # fmt: skip
            if args.open:
                webbrowser.open(server.url)
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                message(args, "viewer stopped")
            return 0
        finally:
            server.server_close()
    finally:
        data.close()
