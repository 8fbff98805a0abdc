"""Process and rewrite datasets in parallel: map a function over the samples (or shards) of a dataset and write
new shards, on a local process pool (default) or a Dask cluster, resumable and exactly once.

- :func:`map_dataset`: one task per input (a shard, or a file of another format: :mod:`shardstream.convert`);
  each task writes its own output shards ``PREFIX-TTTTTT-PPP.tar`` (deterministic names and bytes).
- engines (:mod:`.engines`): ``"local"`` (processes), ``"dask"`` (a scheduler address, a ``Client`` or a
  ``LocalCluster``), ``"inline"``.
- exactly once: every shard is published all or nothing, and each task writes a manifest last
  (``_tasks/PREFIX-TTTTTT.json``); a rerun skips the tasks whose manifest matches, a failed task is retried,
  and tasks that still fail are listed in a :class:`~shardstream.errors.ProcessingError` at the end.
- the result is indexed: sidecar and DALI indexes per shard, ``dataset.json`` for local outputs.

>>> import shardstream as wds
>>> with wds.ShardWriter("raw-%06d.tar", maxcount=4) as sink:
...     for i in range(8):
...         _ = sink.write({"__key__": f"{i:04d}", "cls": i})
>>> def keep_even(sample):
...     return sample if int(sample["cls"]) % 2 == 0 else None
>>> result = map_dataset("raw-{000000..000001}.tar", "even", keep_even, engine="inline")
>>> result.samples_in, result.samples, result.index
(8, 4, 'even/dataset.json')
"""

from .engines import DaskEngine, Engine, InlineEngine, LocalEngine, make_engine
from .job import JobResult, TaskFailure, map_dataset, run_tasks
from .outputs import Output, TarOutput
from .shell import ShellCommand
from .sources import ShardSource, Skip, TaskSource
from .tasks import Task, TaskResult, run_task

__all__ = [
    "DaskEngine",
    "Engine",
    "InlineEngine",
    "JobResult",
    "LocalEngine",
    "Output",
    "ShardSource",
    "ShellCommand",
    "Skip",
    "TarOutput",
    "Task",
    "TaskFailure",
    "TaskResult",
    "TaskSource",
    "make_engine",
    "map_dataset",
    "run_task",
    "run_tasks",
]
