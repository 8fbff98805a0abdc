"""The tar format (stdlib only): header parsing, the streaming member reader, compression detection."""

from .header import BLOCKSIZE, checksum

__all__ = ["BLOCKSIZE", "checksum"]
