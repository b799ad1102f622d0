"""Where the top package wires a lower layer to a higher one without an import between them.

``runs`` sits below ``tasks`` yet must know every task's checkpoint kinds before it saves or loads a checkpoint.
``vitlab/__init__.py`` (the top, which may know everything) puts here how to register the tasks; the first
question :mod:`vitlab.runs.kinds` is asked runs it, once. Nothing is imported until then.
"""

from __future__ import annotations

from collections.abc import Callable

register_tasks: list[Callable[[], object]] = []  # called once, by the first question about kinds
