"""``Chunks`` (the reader cursor's base, :mod:`shardstream.pipeline.bases`: the C type, or its twin ``PyChunks``) serves lists item by item the same way."""

from __future__ import annotations

import pytest

from shardstream import _native
from shardstream.pipeline import bases
from shardstream.tar import reader

KINDS = [pytest.param(bases.PyChunks, id="python")]
if _native.extension is not None:
    KINDS.append(pytest.param(_native.extension.Chunks, id="c"))


def lists_of(base: type, lists: list, fail_at: int | None = None) -> object:
    class Lists(base):  # type: ignore[misc,valid-type]
        __next__ = base.__next__

        def __init__(self) -> None:
            self.lists, self.fills = list(lists), 0

        def _fill(self) -> bool:
            self.fills += 1
            if self.fills == fail_at:
                raise ValueError("broken shard")
            if not self.lists:
                return False
            self._chunk, self._i = self.lists.pop(0), 0
            return True

    return Lists()


@pytest.mark.parametrize("base", KINDS)
def test_serves_every_item_in_order_and_counts(base):
    it = lists_of(base, [[1, 2], [], [3], [4, 5, 6]])
    assert list(it) == [1, 2, 3, 4, 5, 6]
    assert it._count == 6 and it._i == 3
    assert next(it, "end") == "end"  # stays at the end, asking _fill again


@pytest.mark.parametrize("base", KINDS)
def test_an_error_of_fill_passes_through_and_the_next_call_goes_on(base):
    it = lists_of(base, [[1], [2]], fail_at=2)
    assert next(it) == 1
    with pytest.raises(ValueError, match="broken shard"):
        next(it)
    assert list(it) == [2]
    assert it._count == 2


@pytest.mark.parametrize("base", KINDS)
def test_position_can_be_set_from_python(base):
    """take()/give_back()/restores move ``_i`` and ``_count`` directly; next() serves from there."""
    it = lists_of(base, [["a", "b", "c", "d"]])
    assert next(it) == "a"
    it._i, it._count = 3, 3
    assert list(it) == ["d"]
    assert it._count == 4
    it._chunk, it._i = ["x", "y"], 1
    assert next(it) == "y"


def test_the_reader_cursor_uses_the_c_base_when_built():
    from shardstream.pipeline.stages.reading import ReaderCursor

    assert issubclass(ReaderCursor, bases.Chunks)
    if _native.extension is not None and reader.accelerated():
        assert bases.Chunks is _native.extension.Chunks
