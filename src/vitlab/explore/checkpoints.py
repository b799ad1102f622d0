"""The checkpoints given on the command line, loaded once, and what each computed for an image.

A checkpoint is any model source :func:`vitlab.runs.load_checkpoint` reads (a vitlab run folder or
file, timm or Hugging Face weights, a Hugging Face folder, a ``.keras`` file), with the classes and
the normalisation its data config records. Models are addressed by index, never by path: only the
files given at start-up can be read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data import normalize
from ..errors import CheckpointError, VitlabError
from ..explain.maps import applicable_methods, gradient_map, num_prefix_tokens
from ..explain.record import attention_weights
from ..runs import load_checkpoint
from .images import LabeledImage, RequestError, fit_image

KEEP_ANALYSES = 16


@dataclass
class LoadedModel:
    """A model ready to explain: eval mode, CPU, with its classes and input normalisation."""

    index: int
    path: Path
    model: nn.Module
    name: str
    classes: list[str]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    dataset: str | None

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def image_size(self) -> tuple[int, int]:
        """``(H, W)`` the model reads."""
        size = self.config.img_size
        return (size, size) if isinstance(size, int) else tuple(size)

    @property
    def channels(self) -> int:
        return self.config.in_chans

    @property
    def patch_size(self) -> int | None:
        return getattr(self.config, "patch_size", None)

    def describe(self) -> dict[str, Any]:
        """JSON-ready facts about the model, all read from it."""
        cfg = self.config
        methods = applicable_methods(self.model)
        return {
            "index": self.index,
            "file": str(self.path),
            "model": self.name,
            "dataset": self.dataset,
            "classes": self.classes,
            "image_size": list(self.image_size),
            "channels": self.channels,
            "patch_size": self.patch_size,
            "grid": list(getattr(cfg, "grid", ())),
            "depth": getattr(cfg, "depth", None),
            "heads": getattr(cfg, "num_heads", None),
            "embed_dim": getattr(cfg, "embed_dim", None),
            "pool": getattr(cfg, "pool", None),
            "class_token": bool(getattr(cfg, "class_token", False)),
            "prefix_tokens": num_prefix_tokens(self.model),
            "pos_embed": getattr(cfg, "pos_embed", None),
            "params": sum(p.numel() for p in self.model.parameters()),
            "normalisation": {"mean": list(self.mean), "std": list(self.std)},
            "attention": "attention" in methods,
            "methods": methods,
        }


def load_model(path: str | Path, index: int) -> LoadedModel:
    """Load the classifier at ``path`` (any source; see the module docstring)."""
    loaded = load_checkpoint(path)
    if loaded.kind not in ("classifier", "distilled-classifier"):
        raise CheckpointError(f"--checkpoint {path} is a {loaded.kind} checkpoint: the explorer shows classifiers")
    cfg: Any = loaded.model.config
    chans = cfg.in_chans
    classes = loaded.data.classes or [str(k) for k in range(cfg.num_classes)]
    return LoadedModel(
        index,
        Path(path),
        loaded.model,
        loaded.name or "vit",
        list(classes),
        tuple(loaded.data.mean or (0.0,) * chans),
        tuple(loaded.data.std or (1.0,) * chans),
        loaded.data.dataset,
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
    if entry.patch_size is not None:
        gradient_map(entry.model, blank, patch_size=entry.patch_size)


@dataclass
class Analysis:
    """One model on one image: the fitted image ``(1, C, H, W)``, its normalised input, the logits
    ``(1, K)``, every layer's attention ``(1, H, N, N)`` (empty without attention layers), and
    explanation maps computed so far, by key."""

    image: torch.Tensor
    inputs: torch.Tensor
    logits: torch.Tensor
    weights: list[torch.Tensor]
    maps: dict[tuple, torch.Tensor] = field(default_factory=dict)


class ModelShelf:
    """The loaded checkpoints and a small cache of analyses, keyed by (model, image reference).

    Model computations run one at a time (a lock), so concurrent requests never share a forward pass.
    """

    def __init__(self, checkpoints: list[str | Path]) -> None:
        self.models = [load_given(path, i) for i, path in enumerate(checkpoints)]
        self._analyses: OrderedDict[tuple[int, str], Analysis] = OrderedDict()
        self.lock = threading.RLock()
        for entry in self.models:
            warm_up(entry)

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
            image = fit_image(picture.image, entry.channels, entry.image_size)
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
