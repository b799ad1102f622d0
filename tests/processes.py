"""Child processes a test starts in a session of their own (``start_new_session=True``)."""

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager


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
