"""``python -m vitlab ...`` (and ``torchrun -m vitlab ...``) runs the command-line interface; :func:`entry` is the
``vitlab`` script's."""

import sys


def entry() -> int:
    """``vitlab.cli.main.main()``; a Ctrl-C while its modules are imported ends in one line, exit 130."""
    try:
        from .cli.main import main
    except KeyboardInterrupt:
        print("vitlab: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(entry())
