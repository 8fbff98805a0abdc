"""Stages that rename fields or pick them by pattern: rename, rename_keys, extract_keys (webdataset's).

>>> sample = {"__key__": "k", "seg.png": 1, "img.jpg": 2}
>>> list(rename_keys(seg="*.png", img="*.jpg")([sample]))
[{'seg': 1, 'img': 2}]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from fnmatch import fnmatch
from typing import Any

from ...errors import SampleFormatError
from ..core import stage
from ..error_handlers import annotate, reraise_exception
from .per_sample import _alternatives, getfirst

__all__ = ["extract_keys", "rename", "rename_keys"]

Handler = Callable[[BaseException], bool]


def _rename(source: Iterable[dict[str, Any]], handler: Handler = reraise_exception, keep: bool = True,
            **names: str) -> Iterator[dict[str, Any]]:
    """Rename fields: ``rename(image="jpg;png", label="cls")``. With ``keep`` (default) the other fields stay;
    with ``keep=False`` only the new names are kept.

    >>> list(rename(image="jpg;png")([{"__key__": "k", "png": 1}]))
    [{'__key__': 'k', 'image': 1}]
    """
    replaced = {old for olds in names.values() for old in _alternatives(olds)}
    for sample in source:
        new = None
        try:
            result = {k: v for k, v in sample.items() if k not in replaced} if keep else {}
            for new, olds in names.items():
                result[new] = getfirst(sample, olds)
        except Exception as exn:
            annotate(exn, sample, field=new)
            if handler(exn):
                continue
            break
        yield result


rename = stage(_rename, state="pass", keeps_count=True)


def _rename_keys(source: Iterable[dict[str, Any]], *pairs: tuple[str, str], keep_unselected: bool = False,
                 must_match: bool = True, duplicate_is_error: bool = True, **names: str
                 ) -> Iterator[dict[str, Any]]:
    """Rename fields by glob pattern: ``rename_keys(image="*.jpg", label="*.cls")`` or pairs
    ``("image", "*.jpg")``. Patterns match the lower-cased basename of the field; the last matching pattern
    wins. Unmatched fields are dropped unless ``keep_unselected``.

    >>> list(rename_keys(image="*.png", keep_unselected=True)([{"__key__": "k", "seg.png": 1}]))
    [{'__key__': 'k', 'image': 1}]
    """
    rules = [(pattern, new) for new, pattern in pairs] + [(pattern, new) for new, pattern in names.items()]
    for sample in source:
        result: dict[str, Any] = {}
        matched = {pattern: False for pattern, _ in rules}
        for field, value in sample.items():
            base = re.sub(r".*/", "", field).lower()
            hit = next(((p, new) for p, new in reversed(rules) if fnmatch("." + base, p) or fnmatch(base, p)), None)
            if hit is None:
                if keep_unselected:
                    result[field] = value
                continue
            matched[hit[0]] = True
            target = hit[1]
            if target in result:
                if duplicate_is_error:
                    raise SampleFormatError(f"fields {list(sample)} give {target!r} twice after rename_keys",
                                            url=sample.get("__url__"), key=sample.get("__key__"))
                continue
            result[target] = value
        missing = [p for p, ok in matched.items() if not ok]
        if must_match and missing:
            raise SampleFormatError(f"rename_keys patterns {missing} match none of the fields {list(sample)}",
                                    url=sample.get("__url__"), key=sample.get("__key__"))
        yield result


rename_keys = stage(_rename_keys, state="pass", keeps_count=True)


def _extract_keys(source: Iterable[dict[str, Any]], *patterns: str | Sequence[str], duplicate_is_error: bool = True,
                  ignore_missing: bool = False) -> Iterator[tuple[Any, ...]]:
    """A tuple of the fields matching each glob pattern (``"*.jpg;*.png"``: alternatives).

    >>> list(extract_keys("*.png", "cls")([{"__key__": "k", "seg.png": 1, "cls": 2}]))
    [(1, 2)]
    """
    for sample in source:
        result = []
        for pattern in patterns:
            alternatives = _alternatives(pattern)
            found = [k for k in sample if any(fnmatch("." + k, p) or fnmatch(k, p) for p in alternatives)]
            if not found:
                if ignore_missing:
                    continue
                raise SampleFormatError(f"no field matches {pattern!r}; its fields: {list(sample)}",
                                        url=sample.get("__url__"), key=sample.get("__key__"))
            if len(found) > 1 and duplicate_is_error:
                raise SampleFormatError(f"fields {found} all match {pattern!r}",
                                        url=sample.get("__url__"), key=sample.get("__key__"))
            result.append(sample[found[0]])
        yield tuple(result)


extract_keys = stage(_extract_keys, state="pass", keeps_count=True)
