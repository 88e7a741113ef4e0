"""``python -m delta_datafusion``: the command line (see :mod:`delta_datafusion.cli`)."""

import sys

from .cli import main

sys.exit(main())
