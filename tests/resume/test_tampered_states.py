"""A damaged or tampered state never gives an untyped error, a hang or a huge allocation, in any resumable object.

Every field of a genuine state (taken after a few steps) is replaced by a value of another type, a negative or huge
number, None, a list of another length, nested garbage; deleted; given an extra key. Restoring must then work, or
raise a StateError, at ``load_state_dict`` or within a few items of the next iteration (see tampering.py).
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest
import tampering

import shardstream
from shardstream.errors import StateError

#: mutations that give a field a value of another type: the StateError names the field (a key of its path)
WRONG_TYPES = {"string", "float", "nan", "list", "dict", "garbage", "vast", "long-list"}


def test_the_objects_are_every_kind_of_resumable():
    kinds = {type(tampering.RESUMABLES[name]()).__name__ for name in tampering.RESUMABLES}
    assert kinds >= {"DataPipeline", "WebDataset", "WebLoader", "TrainingDataset", "TrainingLoader", "IndexedDataset",
                     "ExactMixSampler", "Join", "RandomMix", "RoundRobin", "ExactMix"}


@pytest.mark.parametrize("name", sorted(tampering.RESUMABLES))
def test_the_genuine_state_restores(name):
    assert tampering.restore(name, tampering.genuine_state(name)) == "restored"


@pytest.mark.parametrize("name", sorted(tampering.RESUMABLES))
def test_every_field_tampered_is_refused_with_a_state_error_or_restores(name):
    outcomes, unnamed = {}, []
    for where, how, state in tampering.mutations(tampering.genuine_state(name)):
        try:
            outcome = tampering.restore(name, state)  # anything but a StateError propagates: the test fails
        except Exception as e:  # noqa: BLE001 - reported with the field and the mutation
            raise AssertionError(f"{name}: {where} made {how} gave {type(e).__name__}: {e}") from e
        outcomes[outcome.split(":")[0]] = outcomes.get(outcome.split(":")[0], 0) + 1
        if how in WRONG_TYPES and outcome.startswith("refused") and not where.startswith("fingerprint"):
            keys = [key for key in where.split("/") if not key.isdigit()]
            if not any(re.search(rf"\b{re.escape(key)}\b", outcome) for key in keys):
                unnamed.append((where, how, outcome))
    assert outcomes.get("refused at load", 0) + outcomes.get("refused at iter", 0) > 0
    assert unnamed == [], f"errors that do not name the field: {unnamed[:5]}"


def test_a_state_error_names_the_path_of_a_nested_field():
    state = tampering.genuine_state("spec-mix")
    state["chain"]["sources"][1]["source"]["chain"]["sample"] = "three"
    outcome = tampering.restore("spec-mix", state)  # a pipeline restores its chain at the next iter()
    assert outcome.startswith("refused at iter: cannot restore stage 4 (tarfile_to_samples): the state's "
                              "'chain/sources/1/source/chain/sample' is 'three'; expected an integer"), outcome
    state = tampering.genuine_state("training")
    state["plan"]["world_size"] = 0
    with pytest.raises(StateError, match=r"'plan/world_size' is 0; expected an integer in 1\.\.1048576"):
        tampering.RESUMABLES["training"]().load_state_dict(state)


def test_huge_values_are_shown_short():
    state = tampering.genuine_state("training-loader")
    state["plan"]["skip"] = 10**5000  # str() of it would raise
    with pytest.raises(StateError) as info:
        tampering.RESUMABLES["training-loader"]().load_state_dict(state)
    assert "'plan/skip' is an integer of 16610 bits" in str(info.value) and len(str(info.value)) < 400


_HANG = """
import sys, tampering
state = tampering.genuine_state({name!r})
parent = state
for key in {path!r}[:-1]:
    parent = parent[key]
parent[{path!r}[-1]] = 2**62
print(tampering.restore({name!r}, state)[:200])
"""


@pytest.mark.parametrize("name, path", [
    ("training-stream", ("plan", "num_workers")),  # a streaming plan walked every worker's run
    ("spec-mix", ("chain", "sources", 0, "source", "chain", "upstream", "items")),  # an endless shard list replayed
])
def test_the_values_that_hung_are_refused_at_once(name, path):
    """In a child process with a timeout: the base of this fix looped for ever on these."""
    here = pathlib.Path(__file__).parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(here), str(pathlib.Path(shardstream.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(_HANG.format(name=name, path=path))], env=env,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("refused at"), result.stdout
    assert "4611686018427387904" in result.stdout and "expected an integer in" in result.stdout


def test_random_tampering_of_several_fields():
    for seed in range(300):
        tampering.fuzz_one(seed.to_bytes(4, "little"))
