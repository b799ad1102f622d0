"""One door to load any model: ``load_checkpoint(source)``.

``load_checkpoint`` takes a vitlab checkpoint file (:mod:`vitlab.runs.checkpoint`), a checkpoint folder
(``model.safetensors`` inside), a run folder (its ``best/``, else ``last/``), a Hugging Face ``save_pretrained``
folder, a timm or Hugging Face state dict (``.safetensors``, ``.pth``, ``.bin``, ``{"state_dict": ...}``), or a
Keras ``.keras`` file (those three: :mod:`vitlab.runs.foreign`), or a Hugging Face hub model id (``timm/NAME.TAG``,
``hf-hub:timm/NAME``, ``ORG/NAME``; see :mod:`vitlab.runs.hub`), and returns the model (eval mode) with its
:class:`~vitlab.data.DataConfig`. A foreign model's preprocessing is its own: a timm ``pretrained_cfg``
(in a ``config.json`` beside the weights or in the file's metadata) or a Hugging Face ``preprocessor_config.json``.
Files vitlab wrote before this format (metadata ``config`` or ``vitlab_config``, dense ``dense_config``) still load.
What it must guess for a foreign file is returned in ``Loaded.guessed`` and recorded in the
provenance of any file written from it.
"""

from __future__ import annotations

import json
import pickle
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch

from ..data import DataSplits
from ..data.options import DataOptions
from ..device import resolve_device
from ..errors import CheckpointError, VitlabError
from ..interop.checkpoint import read_state_dict
from .checkpoint import is_vitlab, load_vitlab, read_safetensors
from .foreign import is_hf_folder, load_foreign, load_hf_folder, load_keras
from .hub import hub_checkpoint, is_hub_id
from .layout import BEST, LAST, SUMMARY, WEIGHTS
from .loaded import Loaded


def resolve_source(source: str | Path) -> Path:
    """The file (or Hugging Face folder) to read for ``source``: a file; a checkpoint folder; a run
    folder's ``best/`` else ``last/`` checkpoint; a folder with ``config.json`` and weights (Hugging Face).

    A run folder falls back to ``last/`` only where that is the run's own answer: a run whose
    ``summary.json`` says its test ran on ``best/`` while ``best/`` is missing is refused, naming what is
    missing and the way out; a run without a summary (it did not finish) is read from ``last/`` with a
    warning saying so."""
    path = Path(source)
    if not path.exists():
        raise CheckpointError(
            f"no checkpoint at {path}: pass a model file, a checkpoint or run folder, or a Hugging Face folder"
        )
    if path.is_file():
        return path
    if is_hf_folder(path):
        return path
    for candidate in (path / WEIGHTS, path / BEST / WEIGHTS):
        if candidate.is_file():
            return candidate
    last = path / LAST / WEIGHTS
    if last.is_file():
        _check_fallback(path)
        return last
    raise CheckpointError(
        f"no checkpoint in folder {path}: expected {WEIGHTS}, best/{WEIGHTS} or last/{WEIGHTS} "
        f"(a run written by `vitlab train --out`), or a Hugging Face folder (config.json and "
        f"model.safetensors)"
    )


def _check_fallback(run: Path) -> None:
    """Whether ``run/last/`` may stand for the run, which has no ``best/`` (see :func:`resolve_source`)."""
    summary_path = run / SUMMARY
    if not summary_path.is_file():
        warnings.warn(
            f"{run} has no {SUMMARY} (the run did not finish) and no {BEST}/: reading {LAST}/{WEIGHTS}, the last "
            f"epoch's weights",
            stacklevel=3,
        )
        return
    try:
        with open(summary_path, "rb") as f:
            summary = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        summary = None
    test_on = summary.get("test_on") if isinstance(summary, dict) else None
    if isinstance(test_on, str) and f"{BEST}/" in test_on:
        epoch = summary.get("best_epoch") if isinstance(summary, dict) else None
        raise CheckpointError(
            f"{run}: {SUMMARY} says the test ran on {BEST}/ (epoch {epoch}), but {BEST}/{WEIGHTS} is missing: "
            f"resume the run (--resume) to write it again, or pass {run / LAST} to read the last epoch's weights"
        )


def load_checkpoint(
    source: str | Path,
    device: str | torch.device = "cpu",
    *,
    model: str | None = None,
    img_size: int | tuple[int, int] | None = None,
    **config: Any,
) -> Loaded:
    """Rebuild the model at ``source`` (see the module docstring) in eval mode on ``device``.

    For a foreign file, ``model`` names a registered architecture to load into, and ``**config``
    gives fields the weights do not record (e.g. ``num_heads``); ``img_size`` runs it at another
    image size (learned positions resampled). A ``source`` that is no existing path and reads as a hub
    model id (``timm/NAME.TAG``, ``hf-hub:timm/NAME``, ``ORG/NAME``) is fetched through the Hugging Face
    cache (:func:`~vitlab.runs.hub.hub_checkpoint`); ``metadata["source_id"]`` records it. Every failure
    is a :class:`CheckpointError` naming the file or id.
    """
    device = resolve_device(device)
    source_id = str(source) if is_hub_id(source) else None
    path = hub_checkpoint(str(source)) if source_id is not None else resolve_source(source)
    try:
        if path.is_dir():
            loaded = load_hf_folder(path, img_size, config)
        elif path.suffix == ".keras":
            loaded = load_keras(path)
        elif path.suffix == ".safetensors":
            tensors, raw = read_safetensors(path)
            loaded = (
                load_vitlab(path, tensors, raw)
                if is_vitlab(raw)
                else load_foreign(path, tensors, raw, model, img_size, config)
            )
        else:
            tensors, raw = read_state_dict(path)
            loaded = load_foreign(path, tensors, raw, model, img_size, config)
    except CheckpointError:
        raise
    except VitlabError as err:
        raise CheckpointError(f"{path}: {err}") from err
    except (
        ValueError,
        TypeError,
        KeyError,
        RuntimeError,
        OSError,
        EOFError,
        pickle.UnpicklingError,
        zipfile.BadZipFile,
    ) as err:
        detail = " ".join(str(err).split()[:40]) or "no detail"
        raise CheckpointError(f"{path} cannot be loaded as a model ({type(err).__name__}: {detail})") from err
    if source_id is not None:
        loaded.metadata["source_id"] = source_id
    loaded.model.to(device).eval()
    outputs = getattr(getattr(loaded.model, "config", None), "num_classes", None)
    loaded.model.pretrained_cfg = loaded.data.pretrained_cfg(outputs)  # type: ignore[assignment]
    return loaded


def checkpoint_data(
    source: str | Path | Loaded,
    dataset: str | None = None,
    data_dir: str | Path | None = None,
    device: str | torch.device = "auto",
    rows: int | None = None,
    options: DataOptions | None = None,
) -> tuple[Loaded, DataSplits]:
    """The checkpoint's model (eval mode, on ``device``; ``auto``: CUDA when present) and the splits
    of its dataset (or of ``dataset``), normalised with the training run's statistics and read as
    :meth:`Loaded.splits` says with ``options``. A model already loaded (:class:`Loaded`, e.g. with config
    fields its file does not record) is used as it is."""
    loaded = source if isinstance(source, Loaded) else load_checkpoint(source, device)
    return loaded, loaded.splits(dataset, data_dir, rows, options=options)
