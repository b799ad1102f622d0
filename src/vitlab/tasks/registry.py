"""The task registry: every task declared once, as a :class:`TaskSpec`.

A task is what differs between trainings (the loop, the run folder and the checkpoint format are
shared): its config class, the builder of its engine :class:`~vitlab.engine.Task`, the checkpoint
kinds its runs write, what ``vitlab evaluate`` and ``vitlab predict`` do with those checkpoints,
and the line and summary a finished run reports. Everything that lists tasks is derived from here:
``vitlab train --task`` (and ``vitlab pretrain``'s methods), the options each one takes (its config's
fields), which task reads a checkpoint of a given kind, and :func:`vitlab.tasks.run`.

    SPEC = register(TaskSpec("rotation", RotationConfig, build=RotationTask.build, kinds=("rotator",), ...))

Built-in tasks register when :mod:`vitlab.tasks` is imported; every module of the ``vitlab.tasks``
entry-point group (vitlab's own first, a package of one's own the same way) is imported on the first
question about kinds (:func:`vitlab.runs.kinds.load_tasks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CheckpointError, ConfigError
from ..runs.kinds import checkpoint_kinds, register_kinds, unregister_kinds

if TYPE_CHECKING:
    from ..engine import Reporter, RunConfig, Task
    from ..runs import Loaded
    from .result import RunResult


@dataclass(frozen=True)
class TaskSpec:
    """One task, declared once.

    - ``name``: ``--task NAME`` and the kind its run folders record (``classify``, ``segment``, ``mae``, ...).
    - ``config``: its config class (a :class:`~vitlab.engine.RunConfig`); the command line's options for the
      task are this class's fields.
    - ``build(config, data, reporter) -> Task``: load the data when ``data`` is None, seed, build the model,
      and return the engine task.
    - ``kinds``: the checkpoint kinds its runs write (``classifier``, ``segmenter``, ...); the first is the usual.
    - ``summary(result) -> dict``: the run folder's ``summary.json``; ``line(result) -> str``: what
      ``vitlab train`` prints.
    - ``evaluate(loaded, request) -> str`` / ``predict(loaded, request) -> str``: ``vitlab evaluate`` /
      ``vitlab predict`` on one of its checkpoints, as the text to print (None: the command refuses its kinds).
    - ``handoff(result) -> str | None``: where the run's files are and what to do next (default: the run folder).
    - ``preset``: config fields the task fixes (``segment`` and ``detect`` share one config, ``task`` told apart).
    - ``run_kinds``: the kinds its run folders record, when not just ``name`` (pretraining: ``mae``, ``dino``).
    - ``command``: the sub-command that trains it (``train``, or ``pretrain`` for self-supervised methods);
      ``options``: config fields given their own flag on the command line (the rest through ``--set``).
    """

    name: str
    config: type[RunConfig]
    build: Callable[[Any, Any, Reporter], Task]
    kinds: tuple[str, ...]
    summary: Callable[[RunResult], dict[str, Any]]
    line: Callable[[RunResult], str]
    evaluate: Callable[[Loaded, Any], str] | None = None
    predict: Callable[[Loaded, Any], str] | None = None
    handoff: Callable[[RunResult], str | None] | None = None
    preset: dict[str, Any] = field(default_factory=dict)
    command: str = "train"
    options: tuple[str, ...] = field(default_factory=tuple)
    help: str = ""
    run_kinds: tuple[str, ...] = ()


_SPECS: dict[str, TaskSpec] = {}


def register(spec: TaskSpec) -> TaskSpec:
    """Add ``spec`` to the registry (refusing a name or checkpoint kind another task has); returns it."""
    if spec.name in _SPECS and _SPECS[spec.name] is not spec:
        raise ConfigError(f"a task named {spec.name!r} is already registered: choose another name")
    taken = {kind: other.name for other in _SPECS.values() if other is not spec for kind in other.kinds}
    clash = [k for k in spec.kinds if k in taken]
    if clash:
        raise ConfigError(f"checkpoint kind {clash[0]!r} is task {taken[clash[0]]!r}'s: give {spec.name!r} its own")
    _SPECS[spec.name] = spec
    register_kinds(spec.name, spec.run_kinds or (spec.name,), spec.kinds)
    return spec


def unregister(name: str) -> None:
    """Remove the task ``name`` (a task added for a while, e.g. by a test)."""
    _SPECS.pop(name, None)
    unregister_kinds(name)


@contextmanager
def registered(spec: TaskSpec) -> Iterator[TaskSpec]:
    """``with registered(spec):`` the task is in the registry, and out of it afterwards."""
    register(spec)
    try:
        yield spec
    finally:
        unregister(spec.name)


def specs(command: str | None = None) -> list[TaskSpec]:
    """Every registered task (those ``command`` trains, when given), in registration order."""
    return [s for s in _SPECS.values() if command is None or s.command == command]


def get_task(name: str) -> TaskSpec:
    """The task ``name``, or a :class:`~vitlab.errors.ConfigError` naming the registered ones."""
    if name not in _SPECS:
        raise ConfigError(f"unknown task {name!r}: choose one of {', '.join(_SPECS)}")
    return _SPECS[name]


def task_for_kind(kind: str, what: str | None = None) -> TaskSpec:
    """The task whose runs write checkpoints of ``kind``; with ``what`` (``evaluate``, ``predict``), one
    that has that handler, else a :class:`~vitlab.errors.CheckpointError` saying which kinds do."""
    spec = next((s for s in _SPECS.values() if kind in s.kinds), None)
    if spec is None:
        raise CheckpointError(
            f"no registered task reads checkpoints of kind {kind!r}: known kinds are {', '.join(checkpoint_kinds())}"
        )
    if what is not None and getattr(spec, what) is None:
        able = [k for s in _SPECS.values() if getattr(s, what) is not None for k in s.kinds]
        raise CheckpointError(f"vitlab {what} does not take a {kind} checkpoint: it takes {', '.join(able)}")
    return spec


__all__ = [
    "TaskSpec",
    "get_task",
    "register",
    "registered",
    "specs",
    "task_for_kind",
    "unregister",
]
