"""Ctrl-C that is never lost: every SIGINT a command receives ends it as a ``KeyboardInterrupt``.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be when SIGINT's handler runs. Inside a
finaliser -- a ``__del__`` or a weakref callback, such as those of a DataLoader iterator's queues, pipes and
worker handles as they are freed, or any object the garbage collector frees at an allocation -- Python prints
"Exception ignored" and drops it, and the command goes on. Inside an extension module's initialisation (numpy's,
while torch imports it) it can be dropped too, leaving the module half made: the next import of it fails with an
error that has nothing to do with the command. Two mechanisms close that gap:

    noted_interrupts()      a command's block: SIGINT's handler notes the signal before it raises, and
                            raise_if_interrupted() (called where long work passes often: each batch, each step,
                            the command's end) raises it again if a finaliser swallowed it, and an
                            error that ends the command after it is reported as the Ctrl-C (interrupted())
    interrupts_deferred()   a block where SIGINT is only noted and raised right after it: workers are forked and
                            joined, and the loader that held them is freed, inside it

Outside a command's block (vitlab used as a library) SIGINT keeps whatever handler the program set.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_noted = threading.Event()


def _note_and_raise(signum: int, frame: FrameType | None) -> None:
    _noted.set()
    raise KeyboardInterrupt


@contextmanager
def noted_interrupts() -> Iterator[None]:
    """Within the block, SIGINT is noted before its ``KeyboardInterrupt`` is raised (see the module docstring);
    the main thread under Python's own handler only: a program that handles SIGINT itself keeps doing so."""
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    _noted.clear()
    signal.signal(signal.SIGINT, _note_and_raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _noted.clear()


def interrupted() -> bool:
    """Whether a SIGINT was noted in this command's block: an error that ends the command after it is the
    Ctrl-C's doing (an import it cut short leaves its package half made, and the next import of it fails)."""
    return _noted.is_set()


def raise_if_interrupted() -> None:
    """Raise ``KeyboardInterrupt`` if a SIGINT was noted in this command (one a finaliser swallowed included)."""
    if _noted.is_set():
        raise KeyboardInterrupt


class _Deferral:
    """SIGINT's handler inside :func:`interrupts_deferred`: notes the signal (and in the command's record)."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous
        self.received: list[int] = []

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if self.previous is _note_and_raise:
            _noted.set()


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) back in the block, raised as ``KeyboardInterrupt`` right after it: workers are forked
    and joined inside, where an interrupt would be swallowed by a fork handler or a finaliser, or leave a
    half-made iterator. The block's handler only notes the signal (in the command's record too, so an exit that
    runs inside a finaliser does not lose it). Nested in another deferral (a checkpoint written while a loader's
    workers are joined), a Ctrl-C is handed to the outer one and raised when the outermost block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    deferral = _Deferral(previous)
    signal.signal(signal.SIGINT, deferral)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if deferral.received:
            if isinstance(previous, _Deferral):
                previous(deferral.received[0], None)  # still deferred: the outermost block raises it
            elif previous is not signal.SIG_IGN:
                raise KeyboardInterrupt
