"""``python -m tui.cli``: the ``memdeck`` command."""

import sys

from . import main

sys.exit(main())
