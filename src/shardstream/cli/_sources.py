"""What ``shardstream create`` reads: a directory tree (or ImageFolder), a recipe file, JSON Lines.

Each source becomes samples ``{"__key__": key, ext: bytes, ...}``; file contents are copied as they are.

Directory tree: files whose relative paths share a key (by the key rule: ``cat/0001.jpg`` and
``cat/0001.json`` -> key ``cat/0001``) form one sample; the member names in the tar are the relative paths.
With ``imagefolder=True`` the top-level folders are classes (sorted, numbered from 0 as torchvision's
ImageFolder does) and each sample gets a ``cls`` field with its class number.

Recipe (tarp's ``create`` format): one ``archive-name source`` per line; blank lines and ``#`` comments are
skipped; the lines of one sample must be consecutive. A source is a path or URL (relative paths are relative to
the recipe's directory), ``text:CONTENT`` (the rest of the line, as UTF-8), or ``pipe:CMD`` (the output of a
shell command: only with ``allow_pipe``, since it runs whatever the recipe says).

>>> rule = __import__("shardstream.samples").samples.KeyRule(lowercase=False)
>>> [s for s in (p.load() for p in recipe_samples("a.txt text:hi\\na.cls text:1", "r", ".", rule, False))]
[{'__key__': 'a', 'txt': b'hi', 'cls': b'1'}]

JSON Lines: one JSON object per line, one sample each. ``__key__`` gives the key (default: the sample's number,
``%08d``); every other field is an extension: a string value is written as UTF-8 text, other values are encoded
by extension (``"json": {...}``, ``"cls": 3``); ``"EXT.b64": "<base64>"`` writes the decoded bytes as ``EXT``,
and ``"EXT.path": "SOURCE"`` the contents of a source as in recipes (relative to the file's directory).

>>> list(jsonl_samples(['{"txt": "a cat", "cls": 3, "png.b64": "iVBORw=="}'], "x.jsonl", ".", False))
[{'__key__': '00000000', 'txt': b'a cat', 'cls': b'3', 'png': b'\\x89PNG'}]
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..codecs import encode_field
from ..errors import ConfigError, EncodeError
from ..io import split_scheme
from ..io.trust import urls_from_document
from ..samples import KeyRule
from ._common import opened

__all__ = ["Planned", "check_name", "jsonl_samples", "read_source", "recipe_samples", "tree_samples"]


@dataclasses.dataclass
class Planned:
    """A sample whose fields are read only when it is written (so listings can be shuffled for free)."""

    key: str
    fields: list[tuple[str, Callable[[], bytes]]]

    def load(self) -> dict[str, Any]:
        return {"__key__": self.key, **{ext: load() for ext, load in self.fields}}


def check_name(name: str, where: str) -> None:
    """Refuse member names that would be unsafe to extract: absolute, with ``..``, empty parts, NUL."""
    parts = name.split("/")
    if name.startswith("/") or "\0" in name or "\\" in name or any(p in ("", "..") for p in parts):
        raise ConfigError(f"{where}: unsafe archive name {name!r} (absolute, '..', empty part, backslash or NUL)")


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def read_source(spec: str, base: str, allow_pipe: bool) -> bytes:
    """The bytes of a recipe source: ``text:...``, ``pipe:...`` (needs ``allow_pipe``), a path or a URL."""
    if spec.startswith("text:"):
        return spec[5:].encode("utf-8")
    (spec,) = urls_from_document([spec], document=base, allow_commands=allow_pipe)
    scheme, _ = split_scheme(spec)
    if scheme == "" and spec != "-" and not os.path.isabs(spec):
        spec = os.path.join(base, spec)
    with opened(spec) as stream:
        return stream.read()


def _source_loader(spec: str, base: str, allow_pipe: bool, where: str) -> Callable[[], bytes]:
    urls_from_document([spec], document=where, allow_commands=allow_pipe)  # fail before anything is written
    return functools.partial(read_source, spec, base, allow_pipe)


def _const(data: bytes) -> Callable[[], bytes]:
    return functools.partial(bytes, data)  # picklable, for create -j


def tree_samples(root: str, rule: KeyRule, *, imagefolder: bool = False, include_hidden: bool = False
                 ) -> tuple[list[Planned], list[str], list[str]]:
    """``(samples, classes, skipped files)`` of a directory tree, in sorted order (see the module docstring)."""
    if not os.path.isdir(root):
        raise ConfigError(f"{root!r} is not a directory")

    def visible(name: str) -> bool:
        return include_hidden or not name.startswith(".")

    classes = sorted(d for d in os.listdir(root) if visible(d) and os.path.isdir(os.path.join(root, d)))
    if imagefolder and not classes:
        raise ConfigError(f"{root!r} has no class folders; an ImageFolder is ROOT/<class name>/<file>")
    # skipped: hidden files, names without extension or without key (".bashrc"), files outside a class folder
    label = {name: i for i, name in enumerate(classes)}
    samples: list[Planned] = []
    skipped: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if visible(d))
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        groups: dict[str, list[tuple[str, str]]] = {}
        for name in sorted(filenames):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            key, ext = rule.split(rel)
            if not visible(name) or not ext or key.endswith("/") or not key or (imagefolder and rel_dir == "."):
                skipped.append(rel)
                continue
            groups.setdefault(key, []).append((ext, os.path.join(dirpath, name)))
        for key in sorted(groups):
            check_name(key, root)
            fields = sorted(groups[key])
            exts = [ext for ext, _ in fields]
            if len(set(exts)) != len(exts):
                raise ConfigError(f"{root!r}: sample {key!r} has the same extension twice: {exts}")
            loaders: list[tuple[str, Callable[[], bytes]]] = [(ext, functools.partial(_read_file, path))
                                                             for ext, path in fields]
            if imagefolder:
                if "cls" in exts:
                    raise ConfigError(f"{root!r}: sample {key!r} already has a .cls file; --imagefolder adds one")
                loaders.append(("cls", _const(str(label[key.split("/", 1)[0]]).encode())))
            samples.append(Planned(key, loaders))
    return samples, (classes if imagefolder else []), skipped


def recipe_samples(text: str, origin: str, base: str, rule: KeyRule, allow_pipe: bool) -> list[Planned]:
    """The samples of a recipe (see the module docstring); problems name ``origin:line``."""
    samples: list[Planned] = []
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        where = f"{origin}:{lineno}"
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        parts = stripped.split(None, 1)
        if len(parts) != 2:
            raise ConfigError(f"{where}: expected 'archive-name source', got {line!r}")
        name, spec = parts
        check_name(name, where)
        key, ext = rule.split(name)
        if not ext:
            raise ConfigError(f"{where}: archive name {name!r} has no extension")
        loader = _source_loader(spec, base, allow_pipe, where)
        if samples and samples[-1].key == key:
            if any(e == ext for e, _ in samples[-1].fields):
                raise ConfigError(f"{where}: sample {key!r} has the extension {ext!r} twice")
            samples[-1].fields.append((ext, loader))
            continue
        if key in first_line:
            raise ConfigError(f"{where}: key {key!r} appears again after other keys (first on line "
                              f"{first_line[key]}); the lines of one sample must be consecutive")
        first_line[key] = lineno
        samples.append(Planned(key, [(ext, loader)]))
    return samples


def _jsonl_field(name: str, value: Any, base: str, allow_pipe: bool, where: str) -> tuple[str, bytes]:
    if name.endswith(".b64"):
        if not isinstance(value, str):
            raise ConfigError(f"{where}: field {name!r} must be a base64 string")
        try:
            return name[:-4], base64.b64decode(value, validate=True)
        except binascii.Error as e:
            raise ConfigError(f"{where}: field {name!r} is not valid base64: {e}") from e
    if name.endswith(".path"):
        if not isinstance(value, str):
            raise ConfigError(f"{where}: field {name!r} must be a path (a string)")
        return name[:-5], _source_loader(value, base, allow_pipe, where)()
    if isinstance(value, str):
        return name, value.encode("utf-8")
    try:
        return name, encode_field(name, value)
    except EncodeError as e:
        raise EncodeError(f"{where}: field {name!r}: {e}") from e


def jsonl_samples(lines: Iterable[str], origin: str, base: str, allow_pipe: bool) -> Iterator[dict[str, Any]]:
    """The samples of JSON Lines (see the module docstring); problems name ``origin:line``."""
    index = 0
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{origin}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{where}: not valid JSON: {e}") from e
        if not isinstance(obj, dict):
            raise ConfigError(f"{where}: each line must be a JSON object, got {type(obj).__name__}")
        key = obj.pop("__key__", None)
        key = f"{index:08d}" if key is None else str(key)
        check_name(key, where)
        sample: dict[str, Any] = {"__key__": key}
        for name, value in obj.items():
            if name.startswith("__"):
                continue  # other metadata (e.g. __url__) is not data
            ext, data = _jsonl_field(name, value, base, allow_pipe, where)
            if ext in sample:
                raise ConfigError(f"{where}: field {ext!r} is given twice")
            sample[ext] = data
        if len(sample) == 1:
            raise ConfigError(f"{where}: sample {key!r} has no fields")
        index += 1
        yield sample
