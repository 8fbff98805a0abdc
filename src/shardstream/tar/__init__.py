"""The tar format, stdlib only: header parsing, the streaming member reader, compression detection, the writer.

Read the regular files of a shard (plain or gzip/bz2/xz/zstd compressed) as ``(name, data, data_offset)``:

>>> import io
>>> from shardstream.tar import TarStreamWriter, iter_tar
>>> out = io.BytesIO()
>>> with TarStreamWriter(out) as tw:
...     _ = tw.add("000.txt", b"hello"), tw.add("000.cls", b"7")
>>> [(name, data) for name, data, _ in iter_tar(io.BytesIO(out.getvalue()), "demo.tar")]
[('000.txt', b'hello'), ('000.cls', b'7')]
"""

from .compress import iter_tar, open_tar_stream
from .header import BLOCKSIZE, checksum
from .reader import TruncatedTarWarning, accelerated, iter_members
from .writer import RECORDSIZE, TarStreamWriter, archive_size, member_header, member_size

__all__ = [
    "BLOCKSIZE",
    "RECORDSIZE",
    "TarStreamWriter",
    "TruncatedTarWarning",
    "accelerated",
    "archive_size",
    "checksum",
    "iter_members",
    "iter_tar",
    "member_header",
    "member_size",
    "open_tar_stream",
]
