"""webdataset's ``handlers`` module: what a stage does with an exception (see :mod:`shardstream.pipeline.error_handlers`).

>>> import shardstream.handlers as handlers
>>> handlers.ignore_and_continue(ValueError("bad sample"))
True
"""

from .pipeline import ignore_and_continue, ignore_and_stop, reraise_exception, warn_and_continue, warn_and_stop

__all__ = ["ignore_and_continue", "ignore_and_stop", "reraise_exception", "warn_and_continue", "warn_and_stop"]
