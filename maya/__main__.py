"""``python -m maya`` is the ``maya`` command."""

import sys

from maya.cli import main

sys.exit(main())
