"""The explorer's pages, one module each holding its views and a ``router(ctx)`` over the shared :class:`Context`.

Every module's routes pass the same guards (the app's middleware) and answer errors the same way (the
app's exception handlers); a route only parses its parameters, calls a view and returns its dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..app import ExploreConfig
    from ..checkpoints import ModelShelf
    from ..images import ImageBook
    from ..run_index import RunShelf
    from .segment import PromptShelf
    from .train import Trainer


@dataclass
class Context:
    """What the endpoints read: the config, the images, the models, the runs, the promptable runs and the
    trainer."""

    config: ExploreConfig
    book: ImageBook
    shelf: ModelShelf
    run_shelf: RunShelf
    prompt_shelf: PromptShelf
    trainer: Trainer
