"""The URL rule, in one place: schemes, local paths, brace patterns and the inputs a user names.

Every layer that turns a URL into something to read asks here: streaming (:func:`shardstream.io.open_url`),
random access (:func:`shardstream.indexed.open_source`), writing (:class:`shardstream.writer.TarWriter`),
training sources, the command line and the viewer.

- :func:`split_scheme`: ``"pipe:cmd"`` -> ``("pipe", "cmd")``; a path, or a Windows drive letter, has none.
- :func:`local_path`: the filesystem path a URL names, or None. ``file:`` URLs are percent-decoded
  (``file:///data/x%20y.tar`` is ``/data/x y.tar``), ``file:rel/x.tar`` is relative, a ``file:`` URL naming a
  host is a :class:`~shardstream.errors.ConfigError`, and a relative path that merely looks like a URL
  (``data:2024/x.tar``) is a local file when it exists.
- :func:`braceexpand` and :func:`expand_urls`: ``{000..009}`` patterns and ``::``-joined lists; ``${NAME}`` in a
  URL string is replaced by the value of ``WDS_NAME`` (:func:`envsubst`, webdataset's rule).
- :func:`expand_inputs`: what a user names on the command line (files, braces, and optionally directories
  and globs) -> shard URLs.

>>> split_scheme("s3://bucket/a.tar"), split_scheme("C:/data/a.tar")
(('s3', '//bucket/a.tar'), ('', 'C:/data/a.tar'))
>>> local_path("file:///data/x%20y.tar"), local_path("file:rel/x.tar"), local_path("s3://b/a.tar")
('/data/x y.tar', 'rel/x.tar', None)
>>> expand_urls("a-{0..1}.tar::b.tar")
['a-0.tar', 'a-1.tar', 'b.tar']
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Union
from urllib.parse import unquote, urlsplit

from .._lazy import lazy_module
from ..config import Settings, get_settings
from ..errors import ConfigError, UnbalancedBracesError

if TYPE_CHECKING:
    from . import objectstore
else:
    objectstore = lazy_module("shardstream.io.objectstore")  # loaded by a remote glob only

__all__ = ["Urls", "braceexpand", "collect_inputs", "envsubst", "expand_inputs", "expand_urls", "local_path", "split_scheme"]

Urls = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


def split_scheme(url: str) -> tuple[str, str]:
    """``"pipe:cmd"`` -> ``("pipe", "cmd")`` (the scheme lower-cased); a path, or a Windows drive letter, has no
    scheme: ``("", url)``.

    >>> split_scheme("pipe:cat a.tar"), split_scheme("/data/a.tar"), split_scheme("HTTP://h/a.tar")
    (('pipe', 'cat a.tar'), ('', '/data/a.tar'), ('http', '//h/a.tar'))
    """
    m = _SCHEME.match(url)
    if m is None or len(m.group(1)) == 1:
        return "", url
    return m.group(1).lower(), url[m.end() :]


def local_path(url: str | os.PathLike[str]) -> str | None:
    """The filesystem path ``url`` names, or None when it is not a local file (another scheme, or ``-``).

    ``file:///abs`` and ``file://localhost/abs`` are absolute, ``file:rel`` is relative; the path of a ``file:``
    URL is percent-decoded. A ``file:`` URL naming another host is a ConfigError. A string with an unknown
    scheme that exists as a relative path (``data:2024/x.tar``) is that local file.

    >>> local_path("file://localhost/d/a%2Bb.tar"), local_path("data/a.tar"), local_path("-")
    ('/d/a+b.tar', 'data/a.tar', None)
    >>> local_path("file://server/share/a.tar")
    Traceback (most recent call last):
    ...
    shardstream.errors.ConfigError: file: URL 'file://server/share/a.tar' names a remote host 'server'; only local files are supported
    """
    text = os.fspath(url)
    if text == "-":
        return None
    scheme, _ = split_scheme(text)
    if scheme == "file":
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(
                f"file: URL {text!r} names a remote host {parts.netloc!r}; only local files are supported"
            )
        return unquote(parts.path)
    if not scheme or os.path.exists(text):
        return text
    return None


# -- brace patterns --------------------------------------------------------------------------------------------

#: the most URLs one brace pattern may name, and the deepest nesting of its braces
MAX_NAMES = 1 << 22
MAX_NESTING = 100

_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.-?(\d+))?$")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # a letter range walks this order: {Y..b} is Y Z a b
_CHARS = re.compile(r"^([A-Za-z])\.\.([A-Za-z])(?:\.\.-?(\d+))?$")
_ESCAPED = re.compile(r"\\(.)")

# The grammar is that of the ``braceexpand`` package (what webdataset expands with), so a pattern names the same
# shards in both libraries (tests/io/test_braces.py compares them): a group ``{...}`` is a range (``{000..099}``,
# ``{a..e..2}``), else a list if it has a comma outside nested braces (``{a,b{1,2}}``), else literal braces around
# its expanded body (``{x}``, ``{a..3}``); a backslash escapes the next character, removed from the names.


def _groups(text: str) -> list[tuple[bool, str]]:
    """``text`` cut into ``(False, literal)`` and ``(True, body of a {...} group)`` pieces, in order.

    A ``}`` that closes nothing lowers the depth below zero, and the braces after it are counted from there, as
    ``braceexpand`` counts them (so ``}{x}{`` is all literal); the caller has checked that the depth ends at zero.
    """
    pieces: list[tuple[bool, str]] = []
    start = depth = i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            if depth == 0:
                if i > start:
                    pieces.append((False, text[start:i]))
                start = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                pieces.append((True, text[start + 1 : i]))
                start = i + 1
        i += 1
    if start < len(text):
        pieces.append((False, text[start:]))
    return pieces


def _alternatives(body: str) -> list[str]:
    """``body`` split at its commas outside nested braces (one piece: not a list)."""
    pieces, start, depth, i = [], 0, 0, 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 2
            continue
        depth += (c == "{") - (c == "}")
        if c == "," and depth == 0:
            pieces.append(body[start:i])
            start = i + 1
        i += 1
    return [*pieces, body[start:]]


def _sequence(body: str) -> range | tuple[str, range] | None:
    """A range group's numbers (``range``), or ``(letters, positions)`` for a letter range; None if not a range."""
    m = _RANGE.match(body)
    if m:
        a, b, step = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1) or 1
        return range(a, b + 1, step) if a < b else range(a, b - 1, -step)
    m = _CHARS.match(body)
    if m:
        a, b, step = _LETTERS.index(m.group(1)), _LETTERS.index(m.group(2)), int(m.group(3) or 1) or 1
        return _LETTERS, range(a, b + 1, step) if a < b else range(a, b - 1, -step)
    return None


def _number_format(body: str) -> str:
    """The ``%`` format of a numeric range group's names: zero-padded to its widest end when an end is."""
    a, b = _RANGE.match(body).group(1, 2)  # type: ignore[union-attr]
    padded = any(s not in ("0", "-0") and s.startswith(("0", "-0")) for s in (a, b))
    return f"%0{max(len(a), len(b))}d" if padded else "%d"


def _range_names(body: str, numbers: range | tuple[str, range]) -> list[str]:
    if isinstance(numbers, tuple):
        letters, positions = numbers
        return [letters[p] for p in positions]
    return list(map(_number_format(body).__mod__, numbers))


def _one_range(pieces: list[tuple[bool, str]]) -> list[str] | None:
    """The names of ``prefix{a..b}suffix`` with a numeric range (the common shard pattern), each made by one
    format (no pass per piece); None for any other shape."""
    groups = [k for k, (is_group, _) in enumerate(pieces) if is_group]
    if len(groups) != 1 or not isinstance(numbers := _sequence(body := pieces[groups[0]][1]), range):
        return None
    before = "".join(piece for _, piece in pieces[: groups[0]]).replace("%", "%%")
    after = "".join(piece for _, piece in pieces[groups[0] + 1 :]).replace("%", "%%")
    return list(map((before + _number_format(body) + after).__mod__, numbers))


def _expand(text: str) -> list[str]:
    """The names of ``text`` (balanced), escapes not yet removed."""
    pieces = _groups(text)
    if (names := _one_range(pieces)) is not None:
        return names
    names = [""]
    for is_group, piece in pieces:
        if not is_group:
            choices = [piece]
        elif (numbers := _sequence(piece)) is not None:
            choices = _range_names(piece, numbers)
        elif len(alternatives := _alternatives(piece)) > 1:
            choices = [name for alternative in alternatives for name in _expand(alternative)]
        else:
            choices = ["{" + name + "}" for name in _expand(piece)]
        if names == [""]:
            names = list(choices)
        elif len(choices) == 1:
            names = [name + choices[0] for name in names]
        else:
            names = [name + choice for name in names for choice in choices]
    return names


def _count(text: str) -> int:
    """How many names :func:`_expand` makes of ``text``, without making them (the same walk, counting)."""
    count = 1
    for is_group, piece in _groups(text):
        if not is_group:
            continue
        if (numbers := _sequence(piece)) is not None:
            count *= len(numbers[1] if isinstance(numbers, tuple) else numbers)
        elif len(alternatives := _alternatives(piece)) > 1:
            count *= sum(_count(alternative) for alternative in alternatives)
        else:
            count *= _count(piece)
    return count


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2:]}"


def _check_balance(pattern: str) -> None:
    """Raise :class:`~shardstream.errors.UnbalancedBracesError` unless the braces' depth ends at zero
    (``braceexpand``'s rule: ``}{`` passes)."""
    opened: list[int] = []  # the positions of the '{' not closed yet
    stray: list[int] = []  # the positions of the '}' that closed nothing
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            opened.append(i)
        elif c == "}":
            if opened:
                opened.pop()
            else:
                stray.append(i)
        i += 1
    if len(opened) != len(stray):
        raise UnbalancedBracesError(pattern, opened[0] if len(opened) > len(stray) else stray[0])


def braceexpand(pattern: str) -> list[str]:
    """Bash-style brace expansion as webdataset does it (the ``braceexpand`` package): ``{a,b}`` alternatives,
    ``{000..099}`` zero-padded ranges, ``{a..e}`` letter ranges, ``{0..10..2}`` steps, descending ranges,
    nesting; ``\\{`` is a literal brace, and a group that is neither a range nor a list stays literal
    (``{x}``, ``{a..3}``). Unbalanced braces raise :class:`~shardstream.errors.UnbalancedBracesError`.

    One pattern names at most :data:`MAX_NAMES` (4,194,304) URLs and nests braces at most
    :data:`MAX_NESTING` (100) deep: beyond, a ConfigError says so before anything is built (a spec file is
    untrusted input: ``{0..99999999}`` must not take the machine's memory).

    >>> braceexpand("x{1..10..4}y"), braceexpand("{9..11}"), braceexpand("keep{this}and\\\\{that\\\\}")
    (['x1y', 'x5y', 'x9y'], ['9', '10', '11'], ['keep{this}and{that}'])
    >>> braceexpand("photos-{0000..0002.tar")
    Traceback (most recent call last):
    ...
    shardstream.errors.UnbalancedBracesError: unbalanced braces in the brace pattern 'photos-{0000..0002.tar': the '{' at position 7 is never closed: add its '}', or write a literal brace with a backslash (\\{ or \\})
    """
    depth = deepest = 0
    for char in pattern:  # an over-estimate (escapes counted too): cheap, and bounds the recursion below
        depth += (char == "{") - (char == "}")
        deepest = max(deepest, depth)
    if deepest > MAX_NESTING:
        raise ConfigError(f"the brace pattern {_short(pattern)!r} nests braces {deepest} deep, more than "
                          f"{MAX_NESTING}")
    _check_balance(pattern)
    count = _count(pattern)
    if count > MAX_NAMES:
        raise ConfigError(f"the brace pattern {_short(pattern)!r} expands to {count:,} names, more than the "
                          f"{MAX_NAMES:,} one pattern may name; split it into several patterns (joined by '::') "
                          "or list the shards in a file")
    names = _expand(pattern)
    return [_ESCAPED.sub(r"\1", name) for name in names] if "\\" in pattern else names


def expand_urls(urls: Urls | Iterable[str | os.PathLike[str]]) -> list[str]:
    """A string is split on ``::`` and each part brace-expanded; a list (of strings or paths) is taken as is."""
    if isinstance(urls, (str, os.PathLike)):
        return [url for part in os.fspath(urls).split("::") for url in braceexpand(envsubst(part))]
    if isinstance(urls, Sequence) or hasattr(urls, "__iter__"):
        result = []
        for url in urls:
            if not isinstance(url, (str, os.PathLike)):
                raise ConfigError(f"a shard list must contain strings or paths, not {url!r}")
            result.append(os.fspath(url))
        return result
    raise ConfigError(f"shards must be a string (with {{..}} and ::) or a list of URLs, not {urls!r}")


_VAR = re.compile(r"\$\{(\w+)\}")


def envsubst(url: str, settings: Settings | None = None) -> str:
    """``url`` with each ``${NAME}`` replaced by the value of the environment variable ``WDS_NAME`` (webdataset's
    rule); a missing variable is a :class:`~shardstream.errors.ConfigError` naming it.

    >>> envsubst("${DATA}/train-{000..009}.tar", Settings(url_vars=(("DATA", "/mnt/data"),)))
    '/mnt/data/train-{000..009}.tar'
    """
    if "${" not in url:
        return url
    values = dict((settings or get_settings()).url_vars)

    def value(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise ConfigError(f"{url!r} uses ${{{m.group(1)}}} but the environment variable WDS_{m.group(1)} is not "
                              "set; set it, or write the value into the URL")
        return values[m.group(1)]

    return _VAR.sub(value, url)


# -- what a user names -----------------------------------------------------------------------------------------


def _shard_names(directory: str) -> list[str]:
    """The shards in a directory: ``*.tar*`` and ``*.tgz`` files, not indexes or hidden files, sorted."""
    return [
        os.path.join(directory, n) for n in sorted(os.listdir(directory))
        if (".tar" in n or n.endswith(".tgz")) and not n.endswith((".ssidx", ".idx")) and n[0] != "."
    ]  # fmt: skip


def expand_inputs(args: Sequence[str], *, directories: bool = False, globs: bool = False) -> list[str]:
    """Inputs a user named -> shard URLs, in order: ``{000..009}`` brace patterns are expanded (for URLs the shell
    cannot glob) unless the argument exists as a file; with ``directories``, a directory stands for its shards
    (``*.tar*``, ``*.tgz``); with ``globs``, a local pattern that is not itself a file is globbed, and so is an
    object store pattern (``az://container/train-*.tar``: listed in the store, sorted). ``-``
    (standard input) may appear once; an argument that names no shard is a ConfigError.

    >>> import os
    >>> os.makedirs("inputs", exist_ok=True)
    >>> for name in ("b.tar", "a.tar", "a.tar.ssidx"):
    ...     open(os.path.join("inputs", name), "wb").close()
    >>> expand_inputs(["s-{0..1}.tar", "-"])
    ['s-0.tar', 's-1.tar', '-']
    >>> expand_inputs(["inputs"], directories=True) == [os.path.join("inputs", "a.tar"), os.path.join("inputs", "b.tar")]
    True
    >>> expand_inputs(["inputs/*.tar"], globs=True) == expand_inputs(["inputs"], directories=True)
    True
    """
    def expand(arg: str) -> list[str]:
        path = local_path(arg)
        exists = path is not None and os.path.exists(path)
        if directories and exists and os.path.isdir(path):  # type: ignore[arg-type]
            return _shard_names(path)  # type: ignore[arg-type]
        if "{" in arg and not exists:
            return braceexpand(arg)
        if globs and path is not None and not exists and glob.has_magic(path):
            return sorted(glob.glob(path))
        if globs and path is None and glob.has_magic(arg) and objectstore.is_object_store(arg):
            return objectstore.glob_objects(arg)
        return [arg]

    return collect_inputs(args, expand)


def collect_inputs(args: Sequence[str], expand: Callable[[str], list[str]]) -> list[str]:
    """The URLs ``expand`` gives for each argument, in order: THE rule of inputs, whoever expands them (an
    argument that names no shard is a ConfigError; ``-``, standard input, may appear once).

    >>> collect_inputs(["a", "b"], lambda arg: [arg + "-0.tar"])
    ['a-0.tar', 'b-0.tar']
    """
    urls: list[str] = []
    for arg in args:
        names = expand(arg)
        if not names:
            raise ConfigError(f"{arg!r} names no shard")
        urls.extend(names)
    if urls.count("-") > 1:
        raise ConfigError("'-' (standard input) can be read only once")
    return urls
