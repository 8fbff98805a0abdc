"""``python -m shardstream``: the ``shardstream`` command line (see :mod:`shardstream.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
