"""``python -m empirical_batch.cli``."""

import sys

from . import main

sys.exit(main())
