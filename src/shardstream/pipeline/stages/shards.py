"""The one loop over the shards of a shard list (:class:`ShardReading`), shared by the readers of samples,
records and column batches; and the local file a shard is read from (webdataset's ``__local_path__``)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ...errors import SampleFormatError
from ...io import finish_stream, local_path, open_url
from ...io.prefetch import Lookahead
from ..error_handlers import annotate
from .next_shard import END, opened_as, url_of, with_next

__all__ = ["ShardReading", "local_file"]

Handler = Callable[[BaseException], bool]


def local_file(url: str, opener: Any) -> str | None:
    """The local file a shard is read from: its path, or its copy in a shard cache (webdataset's
    ``__local_path__``); None for pipes, standard input and remote shards streamed as they come."""
    path = local_path(url)
    if path is None and hasattr(opener, "path_for") and url != "-":
        path = opener.path_for(url)
    return path


class ShardReading:
    """The one loop over the shards of a shard list: open each, yield what ``read(stream, url)`` yields, and
    give errors (with the shard's URL attached) to ``handler``. A handler that returns False stops the whole
    iteration, whether it saw a shard error or a sample error (``on_sample_error``, passed to the grouping)."""

    def __init__(self, handler: Handler):
        self.handler, self.stopped = handler, False

    def on_sample_error(self, exn: BaseException) -> bool:
        if self.handler(exn):
            return True
        self.stopped = True
        return False

    def run(self, source: Iterable[Any], read: Callable[[Any, str], Iterator[Any]],
            opener: Callable[[str], Any] | None = None, local_paths: bool = False,
            partials: bool = False) -> Iterator[Any]:
        """``partials``: yield the partial last sample of a damaged shard (its error's ``partial_sample``) when the
        handler skips the error (readers of samples, not of column batches).

        Each shard is opened telling the opener which shard comes next (:class:`~shardstream.io.prefetch.Lookahead`:
        a remote one is opened ahead, exactly, whatever the order): the next item of ``source``, or at its end
        what ``source.following()`` says (a cursor's one-shard source), or nothing (the list ends; a source of a
        single shard without ``following``, read by a caller that opens shards one at a time, lets the opener
        guess, like a bare ``open_url``). The shard opened ahead is closed when the loop ends."""
        told = getattr(source, "following", None)
        shared = getattr(source, "lookahead", None)
        with contextlib.nullcontext(shared) if shared is not None else Lookahead() as ahead:
            for count, (item, following) in enumerate(with_next(source)):
                if following is END and told is not None:
                    following = told()
                known = following is not END or told is not None or count > 0
                after = None if following is END else opened_as(following)
                open_shard = functools.partial(ahead.open, opener or open_url, following=after, known=known)
                yield from self._one(item, read, open_shard, opener, local_paths, partials)
                if self.stopped:
                    return

    def _one(self, item: Any, read: Callable[[Any, str], Iterator[Any]], open_shard: Callable[[str], Any],
             opener: Callable[[str], Any] | None, local_paths: bool, partials: bool) -> Iterator[Any]:
        """One shard of :meth:`run` (opened with ``open_shard``); ``self.stopped`` tells whether the loop stops."""
        url = url_of(item)
        stream = None
        try:
            stream = open_shard(url)
            yield from read(stream, url)
            if self.stopped:
                return
            finish_stream(stream)
        except SampleFormatError:
            raise  # the grouping already gave it to the handler, which raised it
        except Exception as exn:
            annotate(exn, url=url)
            if not self.handler(exn):
                self.stopped = True
                return
            partial = getattr(exn, "partial_sample", None)  # the incomplete last sample of a damaged shard
            if partial is not None and partials:
                local = local_file(url, opener) if local_paths else None
                yield partial if local is None else {**partial, "__local_path__": local}
        finally:
            if stream is not None:
                stream.close()
