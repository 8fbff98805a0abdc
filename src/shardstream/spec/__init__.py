"""Dataset specifications: several sources of shards, how much of each an epoch takes, and how to reach them.

A spec is a YAML or JSON file (read with ``yaml.safe_load``: no tags, no objects) or the same structure as a
Python dict. ``WebDataset("spec.yaml")``, ``TrainingDataset("spec.yaml")`` and the command line accept one::

    seed: 0                       # optional: the mixing schedule is a function of (seed, epoch)
    epoch_size: 10000             # optional: samples per epoch, shared out by proportion/weight
    prefix: s3://bucket/data/     # optional: put before every relative shard URL
    storage:                      # optional: settings for the spec's shard URLs (schema: shardstream.io.storage_config)
      - bucket: bucket
        endpoint_url: http://127.0.0.1:7480
    sources:
      - name: laion
        shards: laion-{000..099}.tar      # a string (brace ranges, ``::``) or a list; any URL form
        samples: 1000000                  # how many samples the source holds (needed by ``repeat``)
        proportion: 0.7                   # or weight: 7 (relative), or repeat: 1.5, or choose: 5000
        fields: [jpg, txt]                # keep only these fields (and __key__, __url__)
        rename: {image: jpg, caption: txt}  # new name: old name
        storage: {profile: laion-reader}  # settings for this source's URLs only
      - name: captions
        shards: /data/captions-{0..9}.jsonl  # stream files are read as records (format: tar|msgpack|cbors|jsonl)
        weight: 3

How many samples of a source an epoch takes (its *count*): ``choose: N`` takes N; ``repeat: r`` takes
``round(r * samples)`` (0.5 takes half, 2 takes each sample twice); ``proportion: p`` takes ``p * epoch_size``;
``weight: w`` takes its share of ``epoch_size`` (weights are relative). Counts are whole numbers that add up
exactly to ``epoch_size`` (largest remainders). A source with none of them takes ``samples`` (one pass).

webdataset 0.2's keys are read too: ``datasets:`` for ``sources:``; per dataset ``buckets`` (or the spec's)
prepended to its shards, ``resample: N`` (N shards drawn with replacement each epoch), ``choose: N`` (N shards
without replacement each epoch: in a ``datasets:`` list ``choose`` counts *shards*, as in webdataset) and
``subsample: f`` (that fraction of the shards each epoch). Environment variables in URLs are not expanded.

A spec's ``storage:`` settings apply to its own shard URLs only (a source's: that source's URLs), and to the files
named after them (their indexes), for as long as the dataset that reads them exists: another URL of the same
bucket or prefix, read by the program itself, keeps the program's own storage settings.

No URL from a spec runs a command: a ``pipe:`` URL (as written, or after the URL rewrite rules) raises
:class:`~shardstream.errors.UnsafeURLError` unless the caller passes ``allow_commands=True``.

>>> spec = load_spec({"epoch_size": 10, "sources": [
...     {"name": "a", "shards": "a-{0..3}.tar", "weight": 2},
...     {"name": "b", "shards": ["b.tar"], "weight": 1, "rename": {"image": "jpg"}}]})
>>> [s.name for s in spec.sources], spec.sources[0].urls[:2]
(['a', 'b'], ('a-0.tar', 'a-1.tar'))
>>> spec.counts()
[7, 3]
>>> try:
...     load_spec({"sources": [{"shards": "pipe:curl -s http://x/a.tar"}]})
... except ValueError as e:  # UnsafeURLError, a ConfigError
...     print("allow_commands=True" in str(e))
True
"""

from .build import SpecShards, source_pipeline, source_sizes, spec_pipeline, spec_source, training_sources
from .parse import DatasetSpec, SourceSpec, apportion, is_spec, load_spec

__all__ = ["DatasetSpec", "SourceSpec", "SpecShards", "apportion", "is_spec", "load_spec", "source_pipeline",
           "source_sizes", "spec_pipeline", "spec_source", "training_sources"]
