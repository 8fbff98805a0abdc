"""shardstream: WebDataset-compatible tar shards for deep learning."""

from . import errors
from .config import Settings, get_settings
from .errors import *  # noqa: F401,F403  (the exception tree is public API)

__version__ = "0.1.0"
