"""``python -m vitlab ...`` (and ``torchrun -m vitlab ...``) runs the command-line interface."""

import sys

from .cli.main import main

sys.exit(main())
