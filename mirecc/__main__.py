"""``python -m mirecc ARGS`` behaves as the ``mirecc`` driver."""

import sys

from mirecc.driver import main_c

sys.exit(main_c())
