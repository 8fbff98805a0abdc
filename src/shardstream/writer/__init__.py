"""Writing WebDataset shards: :class:`TarWriter` (one tar) and :class:`ShardWriter` (a numbered series of tars).

Both are drop-in replacements for webdataset's classes of the same names (``import shardstream as wds``) and
add what a dataset build needs:

- **deterministic bytes**: the same samples give the same archive, byte for byte (mtime 0, uid/gid 0, user and
  group ``"bigdata"``, mode ``0o444``; see :mod:`shardstream.tar.writer`); compressed shards too (gzip with
  mtime 0 and no file name in its header);
- **all or nothing**: a path target is written under a hidden temporary name in the same directory
  (``.NAME.XXXXXXXX.tmp``) and renamed into place only by a successful :meth:`TarWriter.close`; after an
  exception (in the ``with`` block, a full disk, an interrupt) no file exists under the final name;
- **a fixed member order**: the members of a sample are ``KEY.FIELD`` for its fields in sorted order
  (Python string order of the field names, as webdataset writes them);
- **checked samples**: every sample needs a ``__key__`` (a non-empty string without NUL); field names must be
  non-empty strings that neither start with ``.`` nor contain ``/`` or NUL; a key equal to the previous
  sample's is refused, since the two samples would merge into one when read back;
- **exact shard sizes**: :class:`ShardWriter` counts the real bytes of each shard (headers, padding and the
  end of the archive included), so no finished uncompressed shard is larger than ``maxsize``.

>>> import tarfile
>>> with TarWriter("dest.tar") as sink:
...     for index in range(3):
...         _ = sink.write({"__key__": "sample%06d" % index, "txt": f"text {index}", "cls": str(index)})
>>> tarfile.open("dest.tar").getnames()[:4]
['sample000000.cls', 'sample000000.txt', 'sample000001.cls', 'sample000001.txt']
"""

from .batches import SampleBatch
from .encoders import (  # webdataset's writer-module helpers (`webdataset.writer.make_handlers`...)
    add_handlers,
    bytestr,
    cbor_dumps,
    default_handlers,
    encode_based_on_extension,
    encode_based_on_extension1,
    gopen,
    imageencoder,
    make_encoder,
    make_handlers,
    mp_dumps,
    numpy_dumps,
    numpy_npz_dumps,
    tenbin_dumps,
    torch_dumps,
)
from .shardwriter import ShardInfo, ShardWriter
from .tarwriter import TarWriter

__all__ = [
    "SampleBatch", "ShardInfo", "ShardWriter", "TarWriter", "add_handlers", "bytestr", "cbor_dumps", "default_handlers",
    "encode_based_on_extension", "encode_based_on_extension1", "gopen", "imageencoder", "make_encoder",
    "make_handlers", "mp_dumps", "numpy_dumps", "numpy_npz_dumps", "tenbin_dumps", "torch_dumps",
]
