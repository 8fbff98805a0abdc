# Types of the optional C accelerator (_scan.c and _scan_*.c); the docstrings in its method table say what each returns.
from collections.abc import Callable, Sequence
from typing import Any

from typing_extensions import Buffer

def scan(
    buf: Buffer, pos: int, base: int, headers_only: bool = ..., /
) -> tuple[list[tuple[str, Any, int]], int]: ...
def scan_samples(
    buf: Buffer,
    pos: int,
    url: str,
    seen: set[str],
    current: dict[str, Any] | None,
    current_key: str | None,
    split: Callable[[str], tuple[str, str]],
    keys: bytearray | None = ...,
    local: str | None = ...,
    /,
) -> tuple[list[dict[str, Any]], int, dict[str, Any] | None, str | None, int]: ...
def scan_columns(
    buf: Buffer,
    pos: int,
    url: str,
    seen: set[str],
    current: dict[str, Any] | None,
    current_key: str | None,
    split: Callable[[str], tuple[str, str]],
    keys: bytearray | None,
    out: dict[str, list[Any]] | list[list[Any]],
    limit: int,
    fields: tuple[str, ...] | None = ...,
    modes: bytes = ...,
    exact: bool = ...,
    /,
) -> tuple[int, int, dict[str, Any] | None, str | None, int, dict[str, Any] | None]: ...
def slice_column(
    buf: Buffer, offsets: Buffer, sizes: Buffer, start: int, stop: int, mode: int, /
) -> list[Any] | None: ...
def stored_keys(keys: bytearray, /) -> list[str]: ...
def fill_int64(column: list[Any], out: Buffer, /) -> bool: ...
class Chunks:
    _chunk: list[Any]
    _i: int
    _count: int
    def __iter__(self) -> Chunks: ...
    def __next__(self) -> Any: ...

class Tally:
    upstream: Any
    index: int
    count: int
    total: int
    mine: int
    def __iter__(self) -> Tally: ...
    def __next__(self) -> Any: ...

class Relay:
    _chain: Any
    _started: bool
    _done: bool
    def __iter__(self) -> Relay: ...
    def __next__(self) -> Any: ...

PREFETCH_AHEAD: int
HOOKS: dict[str, str]
MAX_WANTED: int

def pack_members(
    buf: bytearray, pos: int, template: bytes, members: Sequence[tuple[bytes, Buffer]], direct: int, /
) -> list[int] | None: ...
def gather_samples(
    tables: dict[int, tuple[Any, ...]], ends: Buffer, rows: Buffer, columns: bool = ..., /
) -> list[dict[str, Any]] | dict[str, list[Any]] | int | None: ...
def permute_positions(n: int, rounds: Buffer, positions: Buffer, out: Buffer, /) -> None: ...
