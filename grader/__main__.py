"""``python -m grader`` is the same as the ``grader`` command."""

import sys

from grader.commands.cli import cli

sys.exit(cli())
