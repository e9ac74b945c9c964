"""``python -m tui``: the ``memdeck`` command."""

import sys

from .main import main

sys.exit(main())
