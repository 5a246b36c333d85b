"""``python -m grader`` is the same as the ``grader`` command."""

import sys

from grader.cli import main

sys.exit(main())
