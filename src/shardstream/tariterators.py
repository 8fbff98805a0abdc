"""webdataset's ``tariterators`` module: from shard URLs to samples (shardstream's readers, webdataset's names).

>>> import io, tarfile
>>> buf = io.BytesIO()
>>> with tarfile.open(fileobj=buf, mode="w") as tf:
...     for name in ("a.txt", "a.cls", "__meta__/x.txt"):
...         info = tarfile.TarInfo(name); info.size = 1; tf.addfile(info, io.BytesIO(b"1"))
>>> [f["fname"] for f in tar_file_iterator(io.BytesIO(buf.getvalue()))]
['a.txt', 'a.cls']
>>> base_plus_ext("dir/img.seg.PNG"), base_plus_ext("README")
(('dir/img', 'seg.PNG'), (None, None))
>>> valid_sample({"__key__": "a"}), valid_sample({})
(True, False)
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

from .io.urls import expand_urls
from .pipeline import (
    group_by_keys,
    reraise_exception,
    tar_file_expander,
    tarfile_samples,
    tarfile_to_samples,
    url_opener,
)
from .samples import KeyRule
from .tar.compress import iter_tar

__all__ = [
    "base_plus_ext", "group_by_keys", "meta_prefix", "meta_suffix", "reraise_exception", "shardlist",
    "tar_file_expander", "tar_file_iterator", "tarfile_samples", "tarfile_to_samples", "trace", "url_opener",
    "valid_sample",
]

#: webdataset's debugging switch (unused: shardstream's errors name the shard, sample and field)
trace = False
#: how the names of metadata members start and end (members under ``__meta__/`` are skipped by :func:`tar_file_iterator`)
meta_prefix = "__"
meta_suffix = "__"
_SPLIT = KeyRule(lowercase=False).split


def base_plus_ext(path: str) -> tuple[str | None, str | None]:
    """``(key, extension)`` of a member name by webdataset's rule (first dot of the basename), case kept;
    ``(None, None)`` for a name without one."""
    key, ext = _SPLIT(path)
    if ext is None or key.endswith("/") or not key:
        return None, None
    return key, ext


def valid_sample(sample: Any) -> bool:
    """A non-empty dict not marked ``__bad__``."""
    return isinstance(sample, dict) and len(sample) > 0 and not sample.get("__bad__", False)


def shardlist(urls: str | Iterable[str], *, shuffle: bool = False) -> Iterator[dict[str, str]]:
    """``{"url": url}`` for each shard of ``urls`` (brace-expanded), shuffled if asked."""
    expanded = expand_urls(urls)
    if shuffle:
        random.shuffle(expanded)
    for url in expanded:
        yield {"url": url}


def tar_file_iterator(fileobj: BinaryIO, skip_meta: str | None = r"__[^/]*__($|/)",
                      handler: Callable[[BaseException], bool] = reraise_exception,
                      select_files: Callable[[str], bool] | None = None,
                      rename_files: Callable[[str], str] | None = None) -> Iterator[dict[str, Any]]:
    """``{"fname", "data"}`` for each file member of a (possibly compressed) tar stream; metadata members
    (``skip_meta``) skipped, ``select_files``/``rename_files`` applied to the names. An error goes to
    ``handler``: True goes on (with nothing more of this stream), False stops."""
    try:
        for name, data, _ in iter_tar(fileobj, getattr(fileobj, "name", "<stream>")):
            if skip_meta is not None and re.match(skip_meta, name):
                continue
            if rename_files is not None:
                name = rename_files(name)
            if select_files is not None and not select_files(name):
                continue
            yield {"fname": name, "data": data}
    except Exception as e:  # noqa: BLE001 - the handler decides
        if not handler(e):
            return
