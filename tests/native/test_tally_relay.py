"""``Tally`` (the splitter's base) and ``Relay`` (the pipeline iterator's base): the C types and their pure-Python
twins pass items on the same way, counts, ends and errors included."""

from __future__ import annotations

import pytest

from shardstream import _native
from shardstream.pipeline import bases
from shardstream.pipeline.iteration import PipelineIterator
from shardstream.pipeline.stages.split import _Split
from shardstream.tar import reader

TALLIES = [pytest.param(bases.PyTally, id="python")]
RELAYS = [pytest.param(bases.PyRelay, id="python")]
if _native.extension is not None:
    TALLIES.append(pytest.param(_native.extension.Tally, id="c"))
    RELAYS.append(pytest.param(_native.extension.Relay, id="c"))


def tally_of(base: type, items, index: int = 0, count: int = 1, on_end=None) -> object:
    class Split(base):  # type: ignore[misc,valid-type]
        __next__ = base.__next__

        def __init__(self) -> None:
            self.upstream, self.index, self.count = iter(items), index, count
            self.ended = 0

        def _ended(self) -> None:
            self.ended += 1
            if on_end is not None:
                on_end(self)

    return Split()


@pytest.mark.parametrize("base", TALLIES)
@pytest.mark.parametrize(("index", "count"), [(0, 1), (0, 3), (2, 3), (1, 2)])
def test_tally_keeps_deals_share_and_counts(base, index, count):
    t = tally_of(base, range(10), index, count)
    assert list(t) == list(range(10))[index::count]
    assert (t.total, t.mine, t.ended) == (10, len(range(10)[index::count]), 1)


@pytest.mark.parametrize("base", TALLIES)
def test_tally_raises_what_ended_raises_and_passes_upstream_errors(base):
    def refuse(t):
        raise LookupError(f"nothing in {t.total}")

    t = tally_of(base, [], on_end=refuse)
    with pytest.raises(LookupError, match="nothing in 0"):
        next(t)

    def broken():
        yield 1
        raise ValueError("broken shard")

    t = tally_of(base, broken())
    assert next(t) == 1
    with pytest.raises(ValueError, match="broken shard"):
        next(t)
    assert t.ended == 0  # an error is not the end


@pytest.mark.parametrize("base", TALLIES)
def test_tally_counters_are_plain_attributes(base):
    """Restores set the counters directly; next() goes on from them."""
    t = tally_of(base, range(6), 1, 2)
    t.total, t.mine = 4, 2
    assert list(t) == [1, 3, 5]  # the rule counts from total: items 5 and 7 of the stream were this part's
    assert (t.total, t.mine) == (10, 5)
    t.upstream = None
    with pytest.raises(TypeError, match="not an iterator"):
        next(t)


def relay_of(base: type, items) -> object:
    class Iteration(base):  # type: ignore[misc,valid-type]
        __next__ = base.__next__

        def __init__(self) -> None:
            self._chain, self._done, self._started = None, False, False
            self.steps = 0

        def _step(self):
            self.steps += 1
            if self._done:
                raise StopIteration
            self._started = True
            self._chain = iter(items)
            return next(self._chain)

    return Iteration()


@pytest.mark.parametrize("base", RELAYS)
def test_relay_serves_the_chain_after_the_first_step_and_drops_it_at_the_end(base):
    it = relay_of(base, [1, 2, 3])
    assert list(it) == [1, 2, 3]
    assert it.steps == 1  # the first item; the chain's end was served without a step
    assert it._done is True and it._chain is None
    assert next(it, "end") == "end"
    assert it.steps == 2  # after the end: the step says so


@pytest.mark.parametrize("base", RELAYS)
def test_relay_passes_errors_and_a_dropped_chain_goes_back_to_step(base):
    def broken():
        yield 1
        yield 2
        raise ValueError("broken shard")

    it = relay_of(base, broken())
    assert next(it) == 1
    it._chain = None  # close() or a restore dropped the chain: _step decides
    assert next(it) == 2  # the step built a chain again (here: the same generator)
    with pytest.raises(ValueError, match="broken shard"):
        next(it)
    assert it._done is False


def test_the_pipeline_uses_the_c_bases_when_built():
    assert issubclass(_Split, bases.Tally) and issubclass(PipelineIterator, bases.Relay)
    if _native.extension is not None and reader.accelerated():
        assert bases.Tally is _native.extension.Tally and bases.Relay is _native.extension.Relay
