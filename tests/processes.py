"""Child processes a test sends Ctrl-C: started in a session of their own, as from a terminal, and reaped."""

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def interruptible(command: list[str], **popen: Any) -> subprocess.Popen:
    """``subprocess.Popen(command, **popen)`` in a session of its own (its process group is the one to signal)
    with SIGINT at its default, as a program started from a terminal has it, whatever the test runner inherited.
    A job a script starts in the background ignores SIGINT, and every program it starts inherits that; vitlab, as
    Python and any Unix program, keeps an inherited SIG_IGN (``nohup``'s promise), so such a child would never see
    the Ctrl-C and would train to its end."""
    return subprocess.Popen(command, start_new_session=True, preexec_fn=_sigint_at_its_default, **popen)


def _sigint_at_its_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def reaped(process: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """The block, then ``process``'s group killed if it still runs: a Ctrl-C the program lost (it went on
    training) never outlives the test."""
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
