"""The checkpoints given on the command line, loaded once, and what each computed for an image.

A checkpoint is any model source :func:`vitlab.runs.load_checkpoint` reads (a vitlab run folder or
file, timm or Hugging Face weights, a Hugging Face folder, a ``.keras`` file), with the classes and
the normalisation its data config records. Models are addressed by index, never by path: only the
files given at start-up can be read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data import normalize
from ..errors import CheckpointError, VitlabError
from ..explain.maps import applicable_methods, gradient_map
from ..explain.record import attention_weights
from ..runs import load_checkpoint
from ..tasks.classify.predict import output_names
from .images import LabeledImage, RequestError, fit_image
from .limits import randomised_model
from .loaded import Analysis, LoadedModel

KEEP_ANALYSES = 16


def load_model(path: str | Path, index: int) -> LoadedModel:
    """Load the classifier at ``path`` (any source; see the module docstring)."""
    loaded = load_checkpoint(path)
    if loaded.kind not in ("classifier", "distilled-classifier"):
        raise CheckpointError(f"--checkpoint {path} is a {loaded.kind} checkpoint: the explorer shows classifiers")
    cfg: Any = loaded.model.config
    chans = cfg.in_chans
    classes = output_names(loaded.data.classes, getattr(cfg, "num_classes", 0), path)  # one name per output
    return LoadedModel(
        index,
        Path(path),
        loaded.model,
        loaded.name or "vit",
        list(classes),
        tuple(loaded.data.mean or (0.0,) * chans),
        tuple(loaded.data.std or (1.0,) * chans),
        loaded.data.dataset,
        loaded.data.preprocess(),
    )


def load_given(path: str | Path, index: int) -> LoadedModel:
    """:func:`load_model` on a file the user named: a file that cannot be read as a checkpoint (missing,
    empty, corrupt, foreign) raises one :class:`~vitlab.errors.CheckpointError` line naming it."""
    try:
        return load_model(path, index)
    except VitlabError:
        raise
    except (ValueError, OSError) as err:
        raise CheckpointError(f"--checkpoint {path}: {' '.join(str(err).split())}") from err


def warm_up(entry: LoadedModel) -> None:
    """One forward and backward pass on a blank image, so the first request is as quick as the rest
    (PyTorch sets up its kernels and autograd on first use)."""
    blank = torch.zeros(1, entry.channels, *entry.image_size)
    if "attention" in applicable_methods(entry.model):
        attention_weights(entry.model, blank)
    gradient_map(entry.model, blank, patch_size=entry.map_patch)


class ModelShelf:
    """The loaded checkpoints and a small cache of analyses, keyed by (model, image reference).

    Model computations run one at a time (a lock), so concurrent requests never share a forward pass.
    """

    def __init__(self, checkpoints: list[str | Path]) -> None:
        self.models = [load_given(path, i) for i, path in enumerate(checkpoints)]
        self._analyses: OrderedDict[tuple[int, str], Analysis] = OrderedDict()
        self._randomised: dict[int, nn.Module] = {}
        self._memo: OrderedDict[tuple, Any] = OrderedDict()
        self.lock = threading.RLock()
        for entry in self.models:
            warm_up(entry)

    def add(self, path: str | Path) -> LoadedModel:
        """Load one more checkpoint (a run the explorer trained) as the next model."""
        with self.lock:
            entry = load_given(path, len(self.models))
            warm_up(entry)
            self.models = [*self.models, entry]
            return entry

    def memo(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """``compute()``'s value, kept under ``key`` (the latest :data:`KEEP_ANALYSES` kept); under the lock."""
        with self.lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
            value = compute()
            self._memo[key] = value
            while len(self._memo) > KEEP_ANALYSES:
                self._memo.popitem(last=False)
            return value

    def randomised(self, entry: LoadedModel) -> nn.Module:
        """:func:`~vitlab.explore.limits.randomised_model` of ``entry``, made once."""
        with self.lock:
            if entry.index not in self._randomised:
                self._randomised[entry.index] = randomised_model(entry)
            return self._randomised[entry.index]

    def get(self, index: int) -> LoadedModel:
        if not 0 <= index < len(self.models):
            if not self.models:
                raise RequestError("no checkpoint is loaded: start `vitlab explore --checkpoint RUN_OR_FILE`", 404)
            raise RequestError(f"no model {index}: the checkpoints given are 0..{len(self.models) - 1}", 404)
        return self.models[index]

    def analyse(self, entry: LoadedModel, picture: LabeledImage) -> Analysis:
        """The (cached) forward pass of ``entry`` on ``picture``, fitted to the model's input."""
        key = (entry.index, picture.ref)
        with self.lock:
            if key in self._analyses:
                self._analyses.move_to_end(key)
                return self._analyses[key]
            image = fit_image(picture.image, entry.channels, entry.image_size, entry.preprocess)
            inputs = normalize(image, entry.mean, entry.std)
            if "attention" in applicable_methods(entry.model):
                logits, weights = attention_weights(entry.model, inputs)
            else:
                with torch.no_grad():
                    logits, weights = entry.model(inputs), []
            analysis = Analysis(image, inputs, logits.float(), [w.float() for w in weights])
            self._analyses[key] = analysis
            while len(self._analyses) > KEEP_ANALYSES:
                self._analyses.popitem(last=False)
            return analysis
