"""Batching and collation: numpy without torch, torch tensors with it, lists for the rest."""

from __future__ import annotations

import numpy as np
import pytest

from shardstream.errors import ConfigError, StateError
from shardstream.pipeline import DataPipeline, batched, default_collation_fn, listed, unbatched, unlisted


def test_tuples_collate_by_position():
    batch = default_collation_fn([(np.zeros((2, 3)), 1, 0.5, "a", b"x", {"m": 1}),
                                  (np.ones((2, 3)), 2, 1.5, "b", b"y", {"m": 2})])
    images, ints, floats, strings, raw, meta = batch
    assert isinstance(batch, tuple)  # as webdataset 1.0.2 (issue 12)
    assert images.shape == (2, 2, 3) and images.dtype == np.float64
    assert ints.tolist() == [1, 2] and floats.tolist() == [0.5, 1.5]
    assert strings == ["a", "b"] and raw == [b"x", b"y"] and meta == [{"m": 1}, {"m": 2}]


def test_dicts_collate_by_key_and_numpy_scalars_stack():
    batch = default_collation_fn([{"x": np.float32(1), "k": "a"}, {"x": np.float32(2), "k": "b"}])
    assert batch["x"].dtype == np.float32 and batch["k"] == ["a", "b"]


def test_plain_arrays_stack():
    assert default_collation_fn([np.zeros(3), np.ones(3)]).shape == (2, 3)


def test_ragged_arrays_give_a_clear_error():
    with pytest.raises(ConfigError, match=r"shapes differ.*collation_fn"):
        default_collation_fn([(np.zeros(2),), (np.zeros(3),)])
    with pytest.raises(ConfigError, match="different fields"):
        default_collation_fn([{"a": 1}, {"b": 1}])


def test_torch_tensors_stack_with_torch():
    torch = pytest.importorskip("torch")
    batch = default_collation_fn([(torch.zeros(3), 1), (torch.ones(3), 2)])
    assert isinstance(batch[0], torch.Tensor) and batch[0].shape == (2, 3)
    assert isinstance(batch[1], np.ndarray)
    assert torch.equal(torch.stack([t for t, _ in unbatched()([batch])]), batch[0])


def test_batched_partial_and_custom_collation():
    assert [len(b) for b in batched(3)(range(7))] == [3, 3, 1]
    assert [len(b) for b in batched(3, partial=False)(range(7))] == [3, 3]
    assert list(batched(2, collation_fn=sum)(range(4))) == [1, 5]
    with pytest.raises(ConfigError):
        list(batched(0)(range(3)))


def test_unbatched_inverts_batched():
    data = [(np.full(2, i), i, f"s{i}") for i in range(5)]
    back = list(DataPipeline(tuple(data), batched(2), unbatched()))
    assert [(a.tolist(), int(b), c) for a, b, c in back] == [(a.tolist(), b, c) for a, b, c in data]
    dicts = [{"x": i, "k": str(i)} for i in range(3)]
    assert [{"x": int(d["x"]), "k": d["k"]} for d in unbatched()(batched(2)(dicts))] == dicts


def test_listed_unlisted():
    assert list(listed(2)(range(3))) == [[0, 1], [2]]
    assert list(unlisted()(listed(2)(range(3)))) == [0, 1, 2]


@pytest.mark.parametrize("stage, batch", [(unlisted(), list), (unbatched(), np.array)])
def test_a_state_inside_a_batch_that_is_now_shorter_cannot_be_restored(stage, batch):
    """The state of ``unbatched``/``unlisted`` is the input's position and the row in the batch there: a batch that
    has fewer rows now (ragged data changed under the checkpoint) is refused as a StateError (a ConfigError too)."""
    it = iter(DataPipeline((batch([1, 2, 3]), batch([4, 5])), stage))
    assert [int(next(it)), int(next(it))] == [1, 2]
    state = it.state_dict()
    shorter = DataPipeline((batch([1]), batch([4, 5])), stage)
    shorter.load_state_dict(state)
    with pytest.raises(StateError, match=r"cannot restore stage 1 \(un(batched|listed)\): the state's 'chain/index' "
                                         r"is 2; the batch there has 1 rows") as caught:
        list(shorter)
    assert isinstance(caught.value, ConfigError)
