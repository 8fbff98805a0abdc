"""The stage families, one module each (webdataset's names in parentheses where they differ):

- :mod:`.per_sample`: ``map``, ``select``, ``decode``, ``to_tuple``, ``map_tuple``, ``map_dict`` (``filters``);
- :mod:`.fields`: ``rename``, ``rename_keys``, ``extract_keys``;
- :mod:`.batching`: ``batched``, ``listed``, ``unbatched``, ``unlisted`` and the default collation;
- :mod:`.sampling`: ``slice``, ``rsample``;
- :mod:`.shuffle`: ``shuffle``, ``detshuffle``;
- :mod:`.split`: ``split_by_node``, ``split_by_worker``, ``single_node_only``, ``check_empty``;
- :mod:`.epochs`: ``repeat``, ``with_epoch``, ``with_length``;
- :mod:`.reading`: ``tarfile_to_samples`` and webdataset's three reading steps (``tariterators``); :mod:`.shards`:
  the loop over the shards of a list that the readers share;
- :mod:`.parallel`: ``parallel_map``, ``tarfile_to_columns``;
- :mod:`.mix`: ``RandomMix``, ``RoundRobin``; :mod:`.exactmix`: ``ExactMix`` (exact counts per epoch);
- :mod:`.records`: ``cbors_to_samples``, ``msgpack_to_samples``, ``jsonl_to_samples`` (stream files).

A stage that keeps nothing between items is a generator; one that keeps state is a cursor class, registered as
the stage itself (``slice = stage(_Slice)``: its ``__init__`` is the stage's signature, its docstring the stage's
documentation; see :mod:`shardstream.pipeline.core`).

>>> from shardstream.pipeline.stages.batching import batched
>>> [b.tolist() for b in batched(2)(range(3))]
[[0, 1], [2]]
"""
