"""``python -m empirical_batch``: the command line."""

import sys

from .cli import main

sys.exit(main())
