"""Files written beside shards and outputs never write through a symbolic link planted in the folder.

A link at the final name (``a.ssidx`` -> a victim file), or at the temporary name the old code used
(``a.ssidx.PID.tmp``), must leave the victim untouched: the file is written under a new random name with
``O_EXCL | O_NOFOLLOW`` and renamed into place, replacing the link.
"""

from __future__ import annotations

import os

import pytest

from shardstream.indexed import index_dataset, index_shard, write_dali_index
from shardstream.indexed.shardindex import sidecar_path
from shardstream.testing import write_shards

VICTIM = b"precious, not to be overwritten\n"


@pytest.fixture
def shard(tmp_path):
    return write_shards(str(tmp_path / "data"), [5])[0]


def _plant(tmp_path, target: str) -> list[str]:
    victims = []
    for i, name in enumerate((target, f"{target}.{os.getpid()}.tmp")):
        victim = tmp_path / f"victim-{i}.txt"
        victim.write_bytes(VICTIM)
        os.symlink(victim, name)
        victims.append(str(victim))
    return victims


def _untouched(victims: list[str], target: str) -> None:
    for victim in victims:
        with open(victim, "rb") as f:
            assert f.read() == VICTIM
    assert os.path.isfile(target) and not os.path.islink(target)


def test_a_shard_index_is_not_written_through_a_link(tmp_path, shard):
    target = sidecar_path(shard)
    victims = _plant(tmp_path, target)
    index_shard(shard).save()
    _untouched(victims, target)


def test_a_dali_index_is_not_written_through_a_link(tmp_path, shard):
    target = shard[:-4] + ".idx"
    victims = _plant(tmp_path, target)
    write_dali_index(shard)
    _untouched(victims, target)
    assert open(target).read().startswith("v1.2")


def test_a_dataset_index_is_not_written_through_a_link(tmp_path, shard):
    target = str(tmp_path / "dataset.json")
    victims = _plant(tmp_path, target)
    index_dataset([shard], target)
    _untouched(victims, target)
