"""The task registry: every task declared once, as a :class:`TaskSpec`.

A task is what differs between trainings (the loop, the run folder and the checkpoint format are
shared): its config class, the builder of its engine :class:`~vitlab.engine.Task`, the checkpoint
kinds its runs write, what ``vitlab evaluate`` and ``vitlab predict`` do with those checkpoints,
and the line and summary a finished run reports. Everything that lists tasks is derived from here:
``vitlab train --task`` (and ``vitlab pretrain``'s methods), the options each one takes (its config's
fields), which task reads a checkpoint of a given kind, and :func:`vitlab.tasks.run`.

    SPEC = register(TaskSpec("rotation", RotationConfig, build=RotationTask.build, kinds=("rotator",), ...))

Built-in tasks register when :mod:`vitlab.tasks` is imported; a package's own tasks (the ``vitlab.tasks``
entry-point group) on the first question to the registry, each plug-in isolated (:func:`load_plugins`).
"""

from __future__ import annotations

import importlib.metadata
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..checks import suggest
from ..errors import CheckpointError, ConfigError
from ..runs.kinds import checkpoint_kinds, register_kinds, unregister_kinds
from .requests import EvaluateRequest, PredictRequest

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
      ``vitlab predict`` on one of its checkpoints, as the text to print (None: the command refuses its kinds);
      ``evaluate_request`` / ``predict_request``: the request class each handler takes, an
      :class:`~vitlab.tasks.EvaluateRequest` / :class:`~vitlab.tasks.PredictRequest` with the task's own
      options as :func:`~vitlab.tasks.requests.option` fields (each becomes a flag of the command).
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
    evaluate_request: type[EvaluateRequest] = EvaluateRequest
    predict_request: type[PredictRequest] = PredictRequest


_SPECS: dict[str, TaskSpec] = {}


def register(spec: TaskSpec) -> TaskSpec:
    """Add ``spec`` to the registry (refusing a name or a kind another task has: see
    :func:`vitlab.runs.kinds.register_kinds`); returns it."""
    if spec.name in _SPECS and _SPECS[spec.name] is not spec:
        raise ConfigError(f"a task named {spec.name!r} is already registered: choose another name")
    register_kinds(spec.name, spec.run_kinds or (spec.name,), spec.kinds)
    _SPECS[spec.name] = spec
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
    """Every registered task (those ``command`` trains, when given), in registration order, the plug-ins'
    included (see :func:`load_plugins`)."""
    load_plugins()
    return [s for s in _SPECS.values() if command is None or s.command == command]


def get_task(name: str) -> TaskSpec:
    """The task ``name``, or a :class:`~vitlab.errors.ConfigError` naming the registered ones (and, for a
    plug-in that failed to load, why)."""
    load_plugins()
    if name not in _SPECS:
        failed = broken()
        if name in failed:
            raise ConfigError(f"task {name!r} is not available: its plug-in failed to load ({failed[name]})")
        raise ConfigError(f"unknown task {name!r}{suggest(name, _SPECS)}: choose one of {', '.join(_SPECS)}")
    return _SPECS[name]


def task_for_kind(kind: str, what: str | None = None) -> TaskSpec:
    """The task whose runs write checkpoints of ``kind``; with ``what`` (``evaluate``, ``predict``), one
    that has that handler, else a :class:`~vitlab.errors.CheckpointError` saying which kinds do."""
    load_plugins()
    spec = next((s for s in _SPECS.values() if kind in s.kinds), None)
    if spec is None:
        failed = "".join(f"; plug-in {name!r} failed to load ({why})" for name, why in broken().items())
        raise CheckpointError(
            f"no registered task reads checkpoints of kind {kind!r}: known kinds are "
            f"{', '.join(checkpoint_kinds())}{failed}"
        )
    if what is not None and getattr(spec, what) is None:
        able = [k for s in _SPECS.values() if getattr(s, what) is not None for k in s.kinds]
        raise CheckpointError(f"vitlab {what} does not take a {kind} checkpoint: it takes {', '.join(able)}")
    return spec


# -- plug-ins: tasks from packages of one's own ---------------------------------------------------------

ENTRY_POINTS = "vitlab.tasks"
"""The entry-point group of plug-in tasks: a module that calls :func:`register`, e.g. in its ``pyproject.toml``

    [project.entry-points."vitlab.tasks"]
    jigsaw = "jigsaw_task"
"""

_broken: dict[str, str] = {}  # entry point name -> why it was skipped
_plugins_loaded = False


def load_plugins() -> None:
    """Load each entry point of the :data:`ENTRY_POINTS` group, once. A plug-in is isolated: one whose module
    is missing, raises, does not parse, calls ``sys.exit`` or registers a name or kind another task has is
    skipped with one warning naming it and why, and what it registered before failing is taken back; vitlab's
    own tasks and the other plug-ins work on, and only asking for its task (by the entry point's name) is
    refused, with the same reason (:func:`broken`)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        before = set(_SPECS)
        try:
            entry.load()
        except (Exception, SystemExit) as err:  # a plug-in's fault of any kind; Ctrl-C still stops vitlab
            for name in set(_SPECS) - before:
                unregister(name)
            _broken[entry.name] = plugin_fault(err)
            warnings.warn(f"plug-in {entry.name!r} ({entry.value}) is skipped: {_broken[entry.name]}", stacklevel=2)


def plugin_fault(err: BaseException) -> str:
    """Why a plug-in failed to load, on one line."""
    if isinstance(err, SystemExit):
        return f"it called sys.exit({err.code!r})"
    if isinstance(err, SyntaxError):
        return f"a syntax error in {err.filename}, line {err.lineno}"
    text = " ".join(str(err).split())[:200]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def broken() -> dict[str, str]:
    """``{entry point name: why it was skipped}`` of the plug-ins that failed to load."""
    load_plugins()
    return dict(_broken)


def reload_plugins() -> None:
    """Forget which plug-ins were loaded or broken, so the next question loads the entry points again (a test
    that changes them)."""
    global _plugins_loaded
    _plugins_loaded = False
    _broken.clear()


__all__ = [
    "ENTRY_POINTS",
    "TaskSpec",
    "broken",
    "get_task",
    "load_plugins",
    "register",
    "registered",
    "reload_plugins",
    "specs",
    "task_for_kind",
    "unregister",
]
