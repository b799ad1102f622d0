"""Which kinds of run and checkpoint exist. The task wing says so: each :class:`vitlab.tasks.TaskSpec` registers
its run kinds and checkpoint kinds here when it is registered; the run folder and the checkpoint format only ask.

This module imports nothing above it: it checks what it is given (names, and that no kind is two tasks'), and
holds it. Registering vitlab's own tasks is the task wing's doing (importing :mod:`vitlab.tasks`), as is finding
a package's tasks through the ``vitlab.tasks`` entry-point group (:func:`vitlab.tasks.plugins.load_plugins`). The
top package wires the two together (:mod:`vitlab._wiring`): the first question asked here registers the tasks, so
a process that only ever imported ``vitlab.runs`` still knows every kind.
"""

from __future__ import annotations

import re

from .._wiring import register_tasks
from ..errors import ConfigError

KIND = re.compile(r"[a-z][a-z0-9_-]{0,63}")  # a kind is recorded in files and typed on command lines

_checkpoints: dict[str, str] = {}  # checkpoint kind -> the task that writes it
_resumable: dict[str, str] = {}  # run kind (a training) -> its task


def _known() -> None:
    while register_tasks:  # the first question: register the tasks (the registering itself asks again)
        register_tasks.pop()()


def register_kinds(task: str, run_kinds: tuple[str, ...], checkpoint_kinds: tuple[str, ...]) -> None:
    """Record that ``task``'s trainings are runs of ``run_kinds`` (resumable) writing ``checkpoint_kinds``;
    a malformed name, or a kind another task has, is refused and nothing is recorded."""
    for what, names, table in (("run", run_kinds, _resumable), ("checkpoint", checkpoint_kinds, _checkpoints)):
        if isinstance(names, str) or not names:
            raise ConfigError(f"task {task!r}: give its {what} kinds as a non-empty tuple of names, got {names!r:.60}")
        for kind in names:
            if not isinstance(kind, str) or not KIND.fullmatch(kind):
                raise ConfigError(
                    f"task {task!r}: {what} kind {kind!r:.60} must be a lower-case name (letters, digits, _ or -)"
                )
            if table.get(kind, task) != task:
                raise ConfigError(f"{what} kind {kind!r} is task {table[kind]!r}'s: give {task!r} its own")
    _resumable.update(dict.fromkeys(run_kinds, task))
    _checkpoints.update(dict.fromkeys(checkpoint_kinds, task))


def unregister_kinds(task: str) -> None:
    """Forget ``task``'s kinds (a task registered for a while, e.g. by a test)."""
    for table in (_resumable, _checkpoints):
        for kind in [k for k, owner in table.items() if owner == task]:
            del table[kind]


def checkpoint_kinds() -> tuple[str, ...]:
    """Every checkpoint kind a registered task writes (``classifier``, ``encoder``, ...)."""
    _known()
    return tuple(_checkpoints)


def resumable_kinds() -> tuple[str, ...]:
    """Every run kind that can continue from its last state: the trainings (``classify``, ``mae``, ...)."""
    _known()
    return tuple(_resumable)


__all__ = ["checkpoint_kinds", "register_kinds", "resumable_kinds", "unregister_kinds"]
