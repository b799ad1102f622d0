"""The checkpoints given on the command line, loaded once, and what each computed for an image.

A checkpoint is any model source :func:`vitlab.runs.load_checkpoint` reads (a vitlab run folder or
file, timm or Hugging Face weights, a Hugging Face folder, a ``.keras`` file), with the classes and
the normalisation its data config records. Models are addressed by index, never by path: only the
files given at start-up can be read.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data import ImageDataset
from ..data.options import DataOptions
from ..data.registry import photo_sources, read_records
from ..errors import CheckpointError, VitlabError
from ..explain.maps import applicable_methods, gradient_map
from ..explain.record import attention_weights
from ..runs import Loaded, load_checkpoint
from ..tasks.classify.predict import output_names
from .images import ImageBook, LabeledImage, OwnSource, RequestError, held_out, model_image
from .loaded import Analysis, LoadedModel
from .pages.limits import randomised_model
from .pages.tokens import reference_statistics

KEEP_ANALYSES = 16


def load_model(path: str | Path, index: int, data_dir: Path | None = None) -> tuple[LoadedModel, Loaded]:
    """Load the classifier at ``path`` (any source; see the module docstring), named as every command names it
    (:attr:`~vitlab.runs.Loaded.display_name`, with the study cell of a model ``vitlab compare`` kept); its
    photos (a folder, manifest, ...) are looked for where its run recorded them (:func:`recorded_folder`)."""
    loaded = load_checkpoint(path)
    if loaded.kind not in ("classifier", "distilled-classifier"):
        raise CheckpointError(f"--checkpoint {path} is a {loaded.kind} checkpoint: the explorer shows classifiers")
    cfg: Any = loaded.model.config
    chans = cfg.in_chans
    classes = output_names(loaded.data.classes, getattr(cfg, "num_classes", 0), path)  # one name per output
    photos = loaded.data.dataset in photo_sources()
    entry = LoadedModel(
        index,
        Path(path),
        loaded.model,
        model_words(loaded),
        list(classes),
        tuple(loaded.data.mean or (0.0,) * chans),
        tuple(loaded.data.std or (1.0,) * chans),
        loaded.data.dataset,
        loaded.data.preprocess(),
        samples=f"{loaded.data.dataset}@{index}" if photos else loaded.data.dataset,
        data_dir=recorded_folder(loaded, data_dir) if photos else None,
    )
    return entry, loaded


def model_words(loaded: Loaded) -> str:
    """The model's name (:attr:`~vitlab.runs.Loaded.display_name`), with its cell's axes for a study's model."""
    provenance = loaded.metadata.get("provenance")
    cell = provenance.get("study_cell") if isinstance(provenance, dict) else None
    if not isinstance(cell, dict):
        return loaded.display_name
    axes = ", ".join(f"{k} {v}" for k, v in cell.items() if k not in ("run", "kind") and not isinstance(v, dict))
    return f"{loaded.display_name} ({axes})" if axes else loaded.display_name


def recorded_folder(loaded: Loaded, given: Path | None = None) -> Path | None:
    """The folder of ``loaded``'s photos as its run recorded it: an absolute ``data_dir`` as it is; a relative one
    against the folders that hold the checkpoint, nearest first (a run folder sits under the folder it was made
    in), then ``given`` (``--data-dir``). The first that holds a source of the recorded kind (indexed, not
    decoded: a run folder of the same name is not it); ``None`` when none does."""
    recorded, kind = loaded.data.data_dir, str(loaded.data.dataset)
    candidates: list[Path] = []
    if recorded:
        where = Path(recorded).expanduser()
        candidates = [where] if where.is_absolute() else [folder / where for folder in loaded.path.resolve().parents]
    candidates += [given] if given is not None else []
    for candidate in candidates:
        if candidate.is_dir() and holds_source(kind, candidate):
            return candidate
    return None


def holds_source(kind: str, folder: Path) -> bool:
    """Whether ``folder`` reads as a photo source of ``kind`` (its records indexed, no pixel decoded)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read_records(kind, folder)
    except (VitlabError, OSError):
        return False
    return True


def own_source(entry: LoadedModel, loaded: Loaded) -> OwnSource | None:
    """The sample source of ``entry``'s own photos, read exactly as ``vitlab evaluate`` reads them
    (:meth:`~vitlab.runs.Loaded.splits`: its resize, crop and split), the test split else validation;
    ``None`` for a model of a registered image set or whose photos are not found."""
    if entry.samples is None or entry.data_dir is None or entry.samples == entry.dataset:
        return None
    folder = entry.data_dir

    def load() -> ImageDataset:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                splits = loaded.splits(data_dir=folder, options=DataOptions(loader="memory"))
        except (VitlabError, OSError) as err:
            raise RequestError(str(err), 404) from err
        return held_out(splits, f"{folder} has no held-out split in memory")

    size = "×".join(map(str, entry.preprocess.image_size))
    return OwnSource(
        f"the photos {entry.name} was trained on ({folder}), read as it reads them: {size}", str(folder), load
    )


def load_given(path: str | Path, index: int, data_dir: Path | None = None) -> tuple[LoadedModel, Loaded]:
    """:func:`load_model` on a file the user named: a file that cannot be read as a checkpoint (missing,
    empty, corrupt, foreign) raises one :class:`~vitlab.errors.CheckpointError` line naming it."""
    try:
        return load_model(path, index, data_dir)
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

    def __init__(self, checkpoints: list[str | Path], book: ImageBook) -> None:
        self.book = book
        self.models: list[LoadedModel] = []
        for path in checkpoints:
            self._shelve(path)
        self._analyses: OrderedDict[tuple[int, str], Analysis] = OrderedDict()
        self._randomised: dict[int, nn.Module] = {}
        self._memo: OrderedDict[tuple, Any] = OrderedDict()
        self.lock = threading.RLock()

    def _shelve(self, path: str | Path) -> LoadedModel:
        """Load, warm up and keep the checkpoint at ``path`` as the next model, offering its own photos."""
        entry, loaded = load_given(path, len(self.models), self.book.data_dir)
        warm_up(entry)
        source = own_source(entry, loaded)
        if source is not None and entry.samples is not None:
            self.book.add_source(entry.samples, source)
        self.models = [*self.models, entry]
        return entry

    def add(self, path: str | Path) -> LoadedModel:
        """Load one more checkpoint (a run the explorer trained) as the next model."""
        with self.lock:
            return self._shelve(path)

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

    def reference(self, entry: LoadedModel) -> tuple[float, float, str]:
        """:func:`~vitlab.explore.pages.tokens.reference_statistics` of ``entry``, on its own held-out images where
        they are found (computed once)."""

        def compute() -> tuple[float, float, str]:
            try:
                data = self.book.split(entry.samples) if entry.samples else None
            except RequestError:
                data = None
            return reference_statistics(entry, data)

        return self.memo(("reference", entry.index), compute)

    def randomised(self, entry: LoadedModel) -> nn.Module:
        """:func:`~vitlab.explore.pages.limits.randomised_model` of ``entry``, made once."""
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
            image = model_image(picture, entry.preprocess)
            inputs = entry.statistics.normalize(image)
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
