"""``python -m mirecc ARGS`` behaves as the ``mirecc`` driver."""

import sys

from mirecc.driver.clang import main_c

sys.exit(main_c())
