"""``python -m vitlab ...`` (and ``torchrun -m vitlab ...``) runs the command-line interface; :func:`entry` is the
``vitlab`` script's."""

import atexit
import os
import sys
from typing import NoReturn


def entry() -> int:
    """``vitlab.cli.main.main()``; a Ctrl-C while its modules are imported ends in one line, exit 130. SIGINT is
    noted from here on (:func:`~vitlab.interrupts.noted_interrupts`): one that lands in a finaliser while torch
    and the command's modules are imported, where Python drops it, still ends the command."""
    from .interrupts import noted_interrupts

    with noted_interrupts():
        try:
            from .cli.main import main
        except KeyboardInterrupt:
            print("vitlab: interrupted", file=sys.stderr)
            code = 130
        else:
            code = main()
    if code == 130:
        _exit_interrupted()
    return code


def _exit_interrupted() -> NoReturn:
    """Exit 130 after a Ctrl-C the command line handled, the exit handlers run first as at any exit. A
    ``KeyboardInterrupt`` that passed through Python code an extension module runs while it is imported (torch's)
    leaves CPython's "unhandled KeyboardInterrupt" mark set though it was handled; a normal exit would then end
    the process by SIGINT (exit -2 instead of 130)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a stream closed
            pass
    atexit._run_exitfuncs()
    os._exit(130)


if __name__ == "__main__":
    sys.exit(entry())
