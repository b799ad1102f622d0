"""Which kinds of run and checkpoint exist. The task wing says so (each :class:`vitlab.tasks.TaskSpec` registers
its run kinds and checkpoint kinds here when it is registered); the run folder and the checkpoint format only ask.

The tasks are found the way plug-ins are, on the first question: vitlab's own (the module :data:`BUILTIN`,
loaded by name like any plug-in, so this module imports nothing above it), then every module in the
``vitlab.tasks`` entry-point group. No list of kinds is written twice, and a package of one's own adds a task
without editing vitlab.
"""

from __future__ import annotations

import importlib
import importlib.metadata

ENTRY_POINTS = "vitlab.tasks"
BUILTIN = "vitlab.tasks"  # the module that registers vitlab's own tasks

_checkpoints: dict[str, str] = {}  # checkpoint kind -> the task that writes it
_resumable: dict[str, str] = {}  # run kind (a training) -> its task
_loaded = False


def register_kinds(task: str, run_kinds: tuple[str, ...], checkpoint_kinds: tuple[str, ...]) -> None:
    """Record that ``task``'s trainings are runs of ``run_kinds`` (resumable) writing ``checkpoint_kinds``."""
    _resumable.update(dict.fromkeys(run_kinds, task))
    _checkpoints.update(dict.fromkeys(checkpoint_kinds, task))


def unregister_kinds(task: str) -> None:
    """Forget ``task``'s kinds (a task registered for a while, e.g. by a test)."""
    for table in (_resumable, _checkpoints):
        for kind in [k for k, owner in table.items() if owner == task]:
            del table[kind]


def load_tasks() -> None:
    """Import :data:`BUILTIN` and the modules of the ``vitlab.tasks`` entry-point group, once (each registers
    its tasks)."""
    global _loaded
    if not _loaded:
        _loaded = True
        plugins = [entry.value.split(":")[0] for entry in importlib.metadata.entry_points(group=ENTRY_POINTS)]
        for module in dict.fromkeys([BUILTIN, *plugins]):
            importlib.import_module(module)


def checkpoint_kinds() -> tuple[str, ...]:
    """Every checkpoint kind a registered task writes (``classifier``, ``encoder``, ...)."""
    load_tasks()
    return tuple(_checkpoints)


def resumable_kinds() -> tuple[str, ...]:
    """Every run kind that can continue from its last state: the trainings (``classify``, ``mae``, ...)."""
    load_tasks()
    return tuple(_resumable)


__all__ = ["checkpoint_kinds", "load_tasks", "register_kinds", "resumable_kinds", "unregister_kinds"]
