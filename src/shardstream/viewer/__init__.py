"""The viewer: thumb through the samples of a dataset in a web browser (``shardstream view DATASET``).

A local web server (standard library only) over a dataset opened for random access: a grid of thumbnails with
paging, jump to a sample number or key, a random sample, a filter by extension, and every field of a sample
shown by its kind (images, text, JSON, class labels with their names, audio and video players, arrays with
shape, dtype, a preview and an image). See :mod:`.data` (dataset access), :mod:`.render` (how fields are shown)
and :mod:`.server` (the HTTP endpoints).

>>> from shardstream.writer import TarWriter
>>> with TarWriter("notes.tar") as sink:
...     _ = sink.write({"__key__": "n0", "txt": "<b>not bold</b>", "json": {"a": 1}})
>>> server = ViewerServer(ViewerData(["notes.tar"]))
>>> self_test(server)
'1 sample in 1 shard; sample 0 (n0): json, txt'
>>> server.server_close(); server.data.close()
"""

from .data import ViewerData
from .server import ViewerServer, self_test

__all__ = ["ViewerData", "ViewerServer", "self_test"]
