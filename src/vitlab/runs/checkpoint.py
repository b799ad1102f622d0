"""The one checkpoint format, and one door to load any model: ``load_checkpoint(source)``.

A vitlab checkpoint is a safetensors file. Its metadata (each value a JSON string) holds::

    format          "vitlab"                 format_version   1
    kind            classifier | distilled-classifier | encoder | segmenter | detector | promptable | clip
    model           the registered model name (or null)      config_type  e.g. "ViTConfig"
    model_config    the model's full config
    data            what a user needs to feed it: image_size, in_chans, mean, std, classes,
                    normalization, the resize and crop (crop_pct, crop_mode, interpolation,
                    resize_backend, crop_rounding: a :class:`~vitlab.data.preprocess.Preprocess`),
                    and where it came from (dataset, data_dir, seed, rows)
    provenance      vitlab version, run folder, epoch, weights ("model" | "ema"), source, guesses
    sha256          SHA-256 of the tensor bytes (everything after the header); checked on load

``load_checkpoint`` takes that file, a checkpoint folder (``model.safetensors`` inside), a run
folder (its ``best/``, else ``last/``), a Hugging Face ``save_pretrained`` folder, a timm or Hugging
Face state dict (``.safetensors``, ``.pth``, ``.bin``, ``{"state_dict": ...}``), or a Keras
``.keras`` file, or a Hugging Face hub model id (``timm/NAME.TAG``, ``hf-hub:timm/NAME``, ``ORG/NAME``;
see :mod:`vitlab.runs.hub`), and returns the model (eval mode) with its :class:`DataConfig`. A foreign
model's preprocessing is its own: a timm ``pretrained_cfg`` (in a ``config.json`` beside the weights or
in the file's metadata) or a Hugging Face ``preprocessor_config.json``. Files vitlab wrote
before this format (metadata ``config`` or ``vitlab_config``, dense ``dense_config``) still load.
What it must guess for a foreign file is returned in ``Loaded.guessed`` and recorded in the
provenance of any file written from it.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import struct
import warnings
import zipfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as safetensors_save
from torch import nn

from .. import __version__
from ..data import DataSplits, load_dataset
from ..data.options import DataOptions
from ..data.photo_sources import SOURCES as PHOTO_SOURCES
from ..data.preprocess import Preprocess
from ..device import resolve_device
from ..errors import CheckpointError, ConfigError, VitlabError
from ..interop.checkpoint import foreign_model, read_state_dict
from ..interop.hf import hf_config_fields
from ..interop.timm_config import timm_fields, timm_label_names
from ..models.registry import build_from_config, build_registered, list_models
from ..ops.patches import _pair
from .files import atomic_write
from .hub import hub_checkpoint, is_hub_id
from .kinds import checkpoint_kinds
from .layout import BEST, LAST, SUMMARY, WEIGHTS

FORMAT, FORMAT_VERSION = "vitlab", 1
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
MAX_HEADER = 100 * 2**20  # a safetensors header above 100 MB is not a checkpoint


@dataclass
class DataConfig:
    """What a model needs from its input: images ``(B, in_chans, *image_size)`` in [0, 1], then
    ``(x - mean) / std`` per channel; ``classes`` name the outputs. ``dataset`` / ``data_dir`` /
    ``seed`` / ``rows`` say where the training data came from (to rebuild its splits); ``splits`` what each
    split held (``{split: {"images", "fingerprint", "missing_classes"}}``, see
    :meth:`~vitlab.data.DataSplits.identity`; empty in files written before it). ``crop_pct``,
    ``crop_mode``, ``interpolation``, ``resize_backend`` and ``crop_rounding`` say how a photo is resized
    and cropped to ``image_size`` (:meth:`preprocess`); their defaults are vitlab's first pipeline (a
    bilinear resize of the whole image to the square), which files written without them used."""

    image_size: tuple[int, int]
    in_chans: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    classes: list[str] = field(default_factory=list)
    normalization: str = "standardize"
    dataset: str | None = None
    data_dir: str | None = None
    seed: int = 0
    rows: int | None = None
    crop_pct: float = 1.0
    crop_mode: str = "squash"
    interpolation: str = "bilinear"
    resize_backend: str = "pil"
    crop_rounding: str = "round"
    splits: dict[str, Any] = field(default_factory=dict)

    def preprocess(self) -> Preprocess:
        """How one decoded image becomes this model's input (uint8; normalise with ``mean`` / ``std``)."""
        return Preprocess(
            image_size=tuple(self.image_size),  # type: ignore[arg-type]
            channels=self.in_chans,
            crop_pct=self.crop_pct,
            crop_mode=self.crop_mode,
            interpolation=self.interpolation,
            mean=tuple(self.mean) or None,
            std=tuple(self.std) or None,
            resize_backend=self.resize_backend,
            crop_rounding=self.crop_rounding,
        )

    def with_preprocess(self, preprocess: Preprocess) -> DataConfig:
        """A copy fed as ``preprocess`` says: its image size, channels, resize and crop, and its mean/std
        when it has them (else this config's)."""
        height, width = preprocess.image_size
        return replace(
            self,
            image_size=(height, width),
            in_chans=preprocess.channels,
            crop_pct=preprocess.crop_pct,
            crop_mode=preprocess.crop_mode,
            interpolation=preprocess.interpolation,
            resize_backend=preprocess.resize_backend,
            crop_rounding=preprocess.crop_rounding,
            mean=tuple(preprocess.mean) if preprocess.mean is not None else tuple(self.mean),
            std=tuple(preprocess.std) if preprocess.std is not None else tuple(self.std),
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "image_size": list(self.image_size), "mean": list(self.mean), "std": list(self.std)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DataConfig:
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        size = d.get("image_size", (0, 0))
        size = (size, size) if isinstance(size, int) else tuple(size)
        return cls(
            **{
                **d,
                "image_size": size,
                "mean": tuple(d.get("mean", ())),
                "std": tuple(d.get("std", ())),
                "classes": list(d.get("classes", [])),
                "splits": d.get("splits") if isinstance(d.get("splits"), dict) else {},
            }
        )

    @classmethod
    def raw_pixels(
        cls,
        size: int,
        classes: Sequence[str],
        dataset: str | None,
        data_dir: str | None = None,
        seed: int = 0,
        rows: int | None = None,
    ) -> DataConfig:
        """Square RGB images ``size x size`` fed in [0, 1] as they are (a model that normalises its own
        input: dense, promptable and CLIP models)."""
        return cls((size, size), 3, (0.0,) * 3, (1.0,) * 3, list(classes), "unit", dataset, data_dir, seed, rows)

    @classmethod
    def from_splits(
        cls, splits: DataSplits, *, data_dir: str | None = None, seed: int = 0, rows: int | None = None
    ) -> DataConfig:
        chans, height, width = splits.image_shape
        return cls(
            (height, width),
            chans,
            tuple(splits.mean),
            tuple(splits.std),
            list(splits.train.classes),
            getattr(splits, "normalization", "standardize"),
            splits.name,
            data_dir,
            seed,
            rows,
        )


@dataclass
class Loaded:
    """A model rebuilt from a checkpoint: ``model`` (eval mode), its :class:`DataConfig`, the
    checkpoint ``kind``, the registered ``name``, the decoded metadata, the file read, and what
    had to be guessed (``{field: why}``; empty for a vitlab file)."""

    model: nn.Module
    data: DataConfig
    kind: str
    name: str | None
    metadata: dict[str, Any]
    path: Path
    guessed: dict[str, str] = field(default_factory=dict)

    def check_finite(self, purpose: str) -> None:
        """Refuse, in one line, a model whose weights hold NaN or infinity: ``purpose`` (e.g. "scoring")
        would give NaN figures or fail inside an optimizer."""
        bad = [
            name
            for name, tensor in self.model.state_dict().items()
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())
        ]
        if bad:
            raise CheckpointError(
                f"{self.path} holds non-finite weights (NaN or infinity in {len(bad)} tensor(s), e.g. {bad[0]}): "
                f"{purpose} needs finite ones; use an earlier checkpoint or train again"
            )

    def splits(
        self,
        dataset: str | None = None,
        data_dir: str | Path | None = None,
        rows: int | None = None,
        options: DataOptions | None = None,
    ) -> DataSplits:
        """The splits of the dataset the model was trained on (or of ``dataset``), normalised as in training.

        Image files (folder, manifest, wds, hf) are read with the model's own preprocessing (its size,
        resize, crop and mean/std: a timm or Hugging Face model's as its library feeds it), changed by the
        fields ``options`` sets, and streamed or held in memory as ``options.loader`` says; tensor datasets
        keep their own size and, when they are not the training dataset, their own statistics.
        """
        data = self.data
        name = dataset or data.dataset
        if name is None:
            raise CheckpointError(f"{self.path} does not record its dataset: pass one (--dataset NAME)")
        same = name == data.dataset
        options = options or DataOptions()
        common: dict[str, Any] = {
            "seed": data.seed,
            "rows": rows if rows is not None else data.rows if same else None,
            "normalization": data.normalization if same else "standardize",
        }
        where = data_dir or (data.data_dir if same else None)
        if name in PHOTO_SOURCES:
            preprocess = options.preprocess(data.preprocess())
            common |= {"loader": options.loader, "workers": options.workers, "max_bad": options.max_bad_images}
            splits = load_dataset(name, where, preprocess=preprocess, **common)
            if preprocess.mean is not None and preprocess.std is not None:
                splits = replace(splits, mean=tuple(preprocess.mean), std=tuple(preprocess.std))
            return self._identified(splits, same, common["rows"])
        if options.loader == "stream" or options.sets_size:
            raise CheckpointError(
                f"{name} is a tensor dataset read at its own size; --image-size and the loader are for image files "
                f"({', '.join(PHOTO_SOURCES)})"
            )
        splits = load_dataset(name, where, **common)
        if same and data.mean:
            splits = replace(splits, mean=tuple(data.mean), std=tuple(data.std))
        return self._identified(splits, same, common["rows"])

    def _identified(self, splits: DataSplits, same: bool, rows: int | None) -> DataSplits:
        """``splits`` checked against what the model was trained on. Class names: the data's must be the
        model's (a model that names its outputs only by index aside); the same names in another order, or some
        of them, are mapped by name (said in a warning); a class the model does not know is refused. Splits:
        a split of the training dataset whose fingerprint differs from the recorded one (files added, removed or
        relabelled since training) is said in a warning."""
        model, have = list(self.data.classes), list(splits.train.classes)
        if model and have != model and not placeholder_names(model):
            unknown = [c for c in have if c not in model]
            if unknown:
                raise CheckpointError(
                    f"{self.path} was trained on the classes {_few(model)}, but {splits.name} has {_few(have)}: "
                    f"{_few(unknown)} {'is' if len(unknown) == 1 else 'are'} not among the model's; use data of "
                    f"the model's own classes"
                )
            how = (
                "the model's in another order"
                if len(have) == len(model)
                else f"{len(have)} of the model's {len(model)}"
            )
            warnings.warn(
                f"{splits.name}'s classes {_few(have)} are {how}: matched by name, each label read as the model's "
                f"output of the same name",
                stacklevel=3,
            )
            splits = splits.relabeled(model)
        recorded = self.data.splits if same else {}
        changed = [
            part
            for part, fingerprint in splits.fingerprints.items()
            if (part != "train" or rows == self.data.rows)
            and isinstance(recorded.get(part), dict)
            and recorded[part].get("fingerprint") not in (None, fingerprint)
        ]
        if changed:
            warnings.warn(
                f"{splits.name}: the {' and '.join(changed)} split{'s' * (len(changed) > 1)} differ from what "
                f"{self.path} was trained with (images added, removed or relabelled since): a held-out split may now "
                f"hold training images, so its figures are not the run's",
                stacklevel=3,
            )
        return splits


# -- writing ----------------------------------------------------------------------------------------


def model_name(model: nn.Module) -> str | None:
    """The registered name recorded on ``model`` (``create_model`` sets ``model.registered_name``)."""
    return getattr(model, "registered_name", None)


def checkpoint_bytes(
    model: nn.Module, kind: str, data: DataConfig, *, name: str | None = None, provenance: dict[str, Any] | None = None
) -> bytes:
    """``model``'s weights and the format's metadata as safetensors bytes (see the module docstring)."""
    if kind not in checkpoint_kinds():
        raise ConfigError(f"checkpoint kind must be one of {checkpoint_kinds()}, got {kind!r}")
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        raise ConfigError(f"{type(model).__name__} has no config to record: vitlab checkpoints hold vitlab models")
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "model": name or model_name(model),
        "config_type": type(config).__name__,
        "model_config": config.to_dict(),
        "data": data.to_dict(),
        "provenance": {"vitlab": __version__, **(provenance or {})},
    }
    blob = safetensors_save(tensors, {k: json.dumps(v) for k, v in meta.items()})
    (n,) = struct.unpack("<Q", blob[:8])
    header, body = json.loads(blob[8 : 8 + n]), blob[8 + n :]  # tensor offsets count from the body
    header["__metadata__"]["sha256"] = json.dumps(hashlib.sha256(body).hexdigest())
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors keeps the body 8-byte aligned
    return struct.pack("<Q", len(text)) + text + body


def save_checkpoint(
    model: nn.Module,
    path: str | Path,
    kind: str,
    data: DataConfig,
    *,
    name: str | None = None,
    provenance: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` atomically as a vitlab checkpoint at ``path`` (a ``.safetensors`` file)."""
    path = Path(path)
    if path.suffix != ".safetensors":
        raise ConfigError(f"a vitlab checkpoint is a .safetensors file (it carries its config), got {path}")
    atomic_write(path, checkpoint_bytes(model, kind, data, name=name, provenance=provenance))
    return path


# -- reading ----------------------------------------------------------------------------------------


def _header_length(blob: bytes, path: Path) -> int:
    if len(blob) < 8:
        raise CheckpointError(f"{path} is too short to be a safetensors file ({len(blob)} bytes)")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > min(MAX_HEADER, len(blob) - 8):
        raise CheckpointError(f"{path} is not a safetensors file or is truncated (header of {n} bytes)")
    return n


def _tensor_bytes(blob: bytes) -> bytes:
    (n,) = struct.unpack("<Q", blob[:8])
    return blob[8 + n :]


def read_safetensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors and raw metadata of a safetensors file; the format's checksum is verified."""
    blob = path.read_bytes()
    n = _header_length(blob, path)
    try:
        header = json.loads(blob[8 : 8 + n])
        raw_meta = header.get("__metadata__") or {}
        tensors = safetensors_load(blob)
    except (SafetensorError, UnicodeDecodeError, json.JSONDecodeError, AttributeError, ValueError) as err:
        raise CheckpointError(f"{path} is not a readable safetensors file ({' '.join(str(err).split()[:30])})") from err
    if "sha256" in raw_meta:
        expected = _json_value(raw_meta, "sha256", path)
        if hashlib.sha256(_tensor_bytes(blob)).hexdigest() != expected:
            raise CheckpointError(
                f"{path} is corrupt: its tensor bytes do not match the recorded SHA-256; "
                f"restore it from a copy or retrain"
            )
    return tensors, dict(raw_meta)


def _json_value(meta: dict[str, str], key: str, path: Path) -> Any:
    try:
        return json.loads(meta[key])
    except (TypeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path}: metadata {key!r} is not JSON ({err})") from err


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
    if _is_hf_folder(path):
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


def placeholder_names(names: Sequence[str]) -> bool:
    """Whether class ``names`` only number the outputs (``0, 1, ...``; Hugging Face's ``LABEL_0, ...``): a
    model named so does not say which class is which, so its outputs are taken by index."""
    return any(
        list(names) == [pattern.format(i) for i in range(len(names))] for pattern in ("{}", "LABEL_{}", "class_{}")
    )


def _few(names: Sequence[str], limit: int = 6) -> str:
    """``(a, b, c)``, or the first ``limit`` names and how many more."""
    shown = ", ".join(map(str, names[:limit]))
    return f"({shown}{f', ... {len(names) - limit} more' if len(names) > limit else ''})"


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


HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def _is_hf_folder(path: Path) -> bool:
    """A Hugging Face ``save_pretrained`` folder: ``config.json`` naming a ``model_type``, and weights."""
    config = path / "config.json"
    if not config.is_file() or not any((path / n).is_file() for n in HF_WEIGHTS):
        return False
    try:
        return "model_type" in json.loads(config.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError):
        return False


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
            loaded = _load_hf_folder(path, img_size, config)
        elif path.suffix == ".keras":
            loaded = _load_keras(path)
        elif path.suffix == ".safetensors":
            tensors, raw = read_safetensors(path)
            loaded = (
                _load_vitlab(path, tensors, raw)
                if _is_vitlab(raw)
                else _load_foreign(path, tensors, raw, model, img_size, config)
            )
        else:
            tensors, raw = read_state_dict(path)
            loaded = _load_foreign(path, tensors, raw, model, img_size, config)
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
    loaded.model.pretrained_cfg = pretrained_cfg(loaded.model, loaded.data)  # type: ignore[assignment]
    return loaded


def _is_vitlab(raw: dict[str, str]) -> bool:
    return raw.get("format") == json.dumps(FORMAT) or any(k in raw for k in ("config", "vitlab_config", "dense_config"))


def _load_vitlab(path: Path, tensors: dict[str, torch.Tensor], raw: dict[str, str]) -> Loaded:
    meta = {k: _json_value(raw, k, path) for k in raw if k != "format" or raw[k].startswith('"')}
    if meta.get("format") == FORMAT:
        version = meta.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise CheckpointError(
                f"{path} is checkpoint format {version!r}; this vitlab ({__version__}) reads up "
                f"to {FORMAT_VERSION}: upgrade vitlab"
            )
        name, config_type, config = meta.get("model"), meta.get("config_type"), meta.get("model_config")
        kind, data = meta.get("kind"), DataConfig.from_dict(meta.get("data") or {})
    else:
        name, config_type, config, kind, data = _legacy_fields(meta)
    if not isinstance(config, dict):
        raise CheckpointError(f"{path} records no model config: it cannot be rebuilt")
    net = _build(name, config_type, config)
    missing, unexpected = _load_weights(net, tensors)
    if missing or unexpected:
        raise CheckpointError(
            f"{path}: weights do not fit its own config (missing {missing[:3]}, unexpected "
            f"{unexpected[:3]}): the file was edited or is damaged"
        )
    return Loaded(net, data, kind or "classifier", name, meta, path)


def _legacy_fields(meta: dict[str, Any]) -> tuple[str | None, str | None, Any, str, DataConfig]:
    """Name, config type, config, kind and data config of a file written before format 1."""
    if "dense_config" in meta:
        config = meta["dense_config"]
        data = DataConfig(
            (config.get("img_size", 64),) * 2,
            3,
            tuple(config.get("mean", ())),
            tuple(config.get("std", ())),
            list(meta.get("classes", [])),
        )
        kind = "segmenter" if config.get("task", "segment") == "segment" else "detector"
        return None, "DenseConfig", config, kind, data
    if "vitlab_config" in meta:
        config = meta["vitlab_config"]
        size = config.get("img_size", 224)
        size = (size, size) if isinstance(size, int) else tuple(size)
        chans = config.get("in_chans", 3)
        return None, "ViTConfig", config, "classifier", DataConfig(size, chans, (0.5,) * chans, (0.5,) * chans)
    config = dict(meta["config"])
    size = config.get("img_size", 224)
    size = (size, size) if isinstance(size, int) else tuple(size)
    kind = "encoder" if "pretrain" in meta else "distilled-classifier" if meta.get("distilled") else "classifier"
    if meta.get("distilled"):
        config["distill_token"] = True
    data = DataConfig(
        size,
        config.get("in_chans", 3),
        tuple(meta.get("mean", ())),
        tuple(meta.get("std", ())),
        list(meta.get("classes", [])),
        "standardize",
        meta.get("dataset"),
        meta.get("data_dir"),
        meta.get("seed", 0),
        meta.get("rows"),
    )
    return meta.get("model"), None, config, kind, data


def _build(name: str | None, config_type: str | None, config: dict[str, Any]) -> nn.Module:
    if name is not None and name in list_models():
        return build_registered(name, **config)
    if config_type is None:
        raise CheckpointError(f"unknown model {name!r} and no config type recorded: it cannot be rebuilt")
    return build_from_config(config_type, config)


def _load_weights(model: nn.Module, tensors: dict[str, torch.Tensor]) -> tuple[list[str], list[str]]:
    result = model.load_state_dict(tensors, strict=False)
    return list(result.missing_keys), list(result.unexpected_keys)


_TIMM_GUESS = (
    "ImageNet's (timm's default for ViTs; no pretrained_cfg beside the weights); pass the source's own if it differs"
)


def _foreign_data(
    model: nn.Module, preprocess: Preprocess, guessed: dict[str, str] | None = None, classes: list[str] | None = None
) -> tuple[DataConfig, dict[str, str]]:
    """The data config of a foreign ``model`` fed as ``preprocess`` says, at the model's own image size."""
    cfg: Any = model.config
    guessed = dict(guessed or {})
    size = tuple(cfg.img_size)
    if preprocess.channels != cfg.in_chans:
        raise CheckpointError(
            f"the source's preprocessing reads {preprocess.channels}-channel images, the weights take "
            f"{cfg.in_chans}: the config beside the weights belongs to another model"
        )
    if tuple(preprocess.image_size) != size:
        guessed["image_size"] = (
            f"{size[0]}x{size[1]}, the model's (its preprocessing gives {preprocess.image_size[0]}x"
            f"{preprocess.image_size[1]}); its resize and crop are kept"
        )
        preprocess = replace(preprocess, image_size=size)
    names = classes or [str(i) for i in range(getattr(cfg, "num_classes", 0))]
    data = DataConfig(size, cfg.in_chans, (), (), names).with_preprocess(preprocess)
    return data, guessed


def _hf_preprocess(model: nn.Module, processor: dict[str, Any] | None) -> tuple[Preprocess, dict[str, str]]:
    """A Hugging Face folder's preprocessing: its ``preprocessor_config.json`` (what transformers computes),
    else ``ViTImageProcessor``'s defaults at the model's size; one it cannot express exactly is approximated
    by a squash resize with its mean/std, and said."""
    cfg: Any = model.config
    height, width = tuple(cfg.img_size)
    chans = cfg.in_chans
    if processor is None:  # vitlab's first pipeline, with ViTImageProcessor's statistics
        why = "0.5 per channel (Hugging Face ViT's default; no preprocessor_config.json)"
        return Preprocess((height, width), chans, mean=(0.5,) * chans, std=(0.5,) * chans), {"mean/std": why}
    try:
        return Preprocess.from_hf(processor, channels=chans), {}
    except ConfigError as err:
        near: dict[str, Any] = {
            **{k: processor[k] for k in ("image_processor_type", "feature_extractor_type") if k in processor},
            **{k: processor[k] for k in ("resample", "image_mean", "image_std", "do_normalize") if k in processor},
            **{k: processor[k] for k in ("do_rescale", "rescale_factor") if k in processor},
            "size": {"height": height, "width": width},
        }
        why = f"a resize of the whole image to the square with its mean/std ({err}); scores differ from transformers'"
        return Preprocess.from_hf(near, channels=chans), {"preprocess": why}


def _timm_config(path: Path, raw: dict[str, str]) -> dict[str, Any] | None:
    """timm's config for the weights at ``path``: the file's ``pretrained_cfg`` metadata (the whole
    ``config.json`` or its ``pretrained_cfg`` alone), else a timm ``config.json`` beside it."""
    if "pretrained_cfg" in raw:
        value = _json_value(raw, "pretrained_cfg", path)
        if not isinstance(value, dict):
            raise CheckpointError(f"{path}: metadata 'pretrained_cfg' is not a JSON object")
        return value if "pretrained_cfg" in value else {"pretrained_cfg": value}
    sibling = path.with_name("config.json")
    if not sibling.is_file():
        return None
    try:
        config = json.loads(sibling.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{sibling} is not JSON ({err})") from err
    is_timm = isinstance(config, dict) and "model_type" not in config
    return config if is_timm and ("pretrained_cfg" in config or "architecture" in config) else None


def _load_foreign(
    path: Path,
    tensors: dict[str, torch.Tensor],
    raw: dict[str, str],
    name: str | None,
    img_size: int | tuple[int, int] | None,
    config: dict[str, Any],
) -> Loaded:
    if not tensors:
        raise CheckpointError(f"{path} holds no tensors")
    known = dict(config)
    if name is not None:
        arch_config: Any = create_model(name).config
        arch = arch_config.to_dict()
        known = {**{k: v for k, v in arch.items() if k not in ("img_size",)}, **known}
    if "vitlab_model_config" in raw:  # a timm file written by `vitlab convert --to timm`
        known = {**_json_value(raw, "vitlab_model_config", path), **known}
    timm = _timm_config(path, raw) if "vitlab_data" not in raw else None
    timm_notes: dict[str, str] = {}
    if timm is not None and "patch_embed.proj.weight" in tensors:
        fields_, timm_notes = timm_fields(timm, tensors["patch_embed.proj.weight"].shape[0])
        timm_notes = {k: v for k, v in timm_notes.items() if k not in known}
        known = {**fields_, **known}
    net, source, guessed = foreign_model(tensors, raw, path, img_size, known)
    guessed = {**guessed, **timm_notes}
    if "vitlab_data" in raw:
        data, data_guesses = DataConfig.from_dict(_json_value(raw, "vitlab_data", path)), dict[str, str]()
        kind = _json_value(raw, "vitlab_kind", path) if "vitlab_kind" in raw else "classifier"
    elif source == "hf":
        processor = path.with_name("preprocessor_config.json")
        pre, notes = _hf_preprocess(net, json.loads(processor.read_text()) if processor.is_file() else None)
        data, data_guesses = _foreign_data(net, pre, notes)
        kind = "classifier"
    else:
        cfg = (timm or {}).get("pretrained_cfg")
        chans, size = net.config.in_chans, net.config.img_size
        if isinstance(cfg, dict):  # the model's own: input size, resize, crop, mean, std
            own = {k: v for k, v in cfg.items() if v is not None}
            pre, notes = Preprocess.from_timm({"input_size": (chans, *_pair(size, "img_size")), **own}), {}
        else:  # a bare state dict: vitlab's first pipeline, with ImageNet's statistics
            pre = Preprocess(size, chans, mean=IMAGENET_MEAN[:chans], std=IMAGENET_STD[:chans])  # type: ignore[arg-type]
            notes = {"mean/std": _TIMM_GUESS}
        classes = timm_label_names(timm, net.config.num_classes) if timm else None
        data, data_guesses = _foreign_data(net, pre, notes, classes)
        kind = "classifier"
    return Loaded(net, data, kind, name, {"source": source}, path, {**guessed, **data_guesses})


def _load_hf_folder(path: Path, img_size: int | tuple[int, int] | None, config: dict[str, Any]) -> Loaded:
    from ..interop.keymaps import hf_to_vitlab
    from ..interop.state import model_from_state

    hf_config = json.loads((path / "config.json").read_text())
    weights = next(path / n for n in HF_WEIGHTS if (path / n).is_file())
    tensors = read_safetensors(weights)[0] if weights.suffix == ".safetensors" else read_state_dict(weights)[0]
    net, guessed = model_from_state(
        hf_to_vitlab(tensors), resize_to=img_size, **{**hf_config_fields(hf_config), **config}
    )
    processor = path / "preprocessor_config.json"
    pre, notes = _hf_preprocess(net, json.loads(processor.read_text()) if processor.is_file() else None)
    data, data_guesses = _foreign_data(net, pre, notes)
    labels = hf_config.get("id2label")
    if isinstance(labels, dict) and len(labels) == net.config.num_classes:
        data.classes = [str(labels.get(str(i), labels.get(i, i))) for i in range(len(labels))]
    return Loaded(net, data, "classifier", None, {"source": "hf"}, path, {**guessed, **data_guesses})


def _load_keras(path: Path) -> Loaded:
    from ..interop.keras import from_keras
    from ..interop.keras_backend import import_keras

    keras = import_keras()  # Keras on torch unless KERAS_BACKEND names another

    net = from_keras(keras.saving.load_model(path, compile=False))
    chans = net.config.in_chans
    pre = Preprocess(net.config.img_size, chans, mean=(0.0,) * chans, std=(1.0,) * chans)  # type: ignore[arg-type]
    data, _ = _foreign_data(net, pre)
    guesses = {"mean/std": "pixels in [0, 1] unscaled (the textbook's Keras preprocessing)"}
    return Loaded(net, data, "classifier", None, {"source": "keras"}, path, guesses)


def load_matching_weights(model: nn.Module, source: str | Path, img_size: tuple[int, int] | None = None) -> list[str]:
    """Copy every weight of the checkpoint at ``source`` (any source :func:`load_checkpoint` reads)
    whose name and shape match ``model``'s; learned positions are resampled to ``img_size`` first.

    Returns the names of ``model``'s tensors left as initialised (e.g. a new head). Raises
    :class:`CheckpointError` if fewer than half of them match (a different architecture). A source
    that does not record its number of heads (a timm state dict) is read with ``model``'s: the
    weights are the same for every head count.
    """
    heads = getattr(getattr(model, "config", None), "num_heads", None)
    unrecorded: dict[str, Any] = {"num_heads": heads} if isinstance(heads, int) else {}
    loaded = load_checkpoint(source, img_size=img_size, **unrecorded)
    set_image_size = getattr(loaded.model, "set_image_size", None)
    if img_size is not None and set_image_size is not None:
        if tuple(getattr(loaded.model.config, "img_size", img_size)) != tuple(img_size):
            set_image_size(img_size)
    state: dict[str, torch.Tensor] = loaded.model.state_dict()
    target = model.state_dict()
    matched = {k: v for k, v in state.items() if k in target and target[k].shape == v.shape}
    if 2 * len(matched) < len(target):
        raise CheckpointError(
            f"too few weights of {loaded.path} fit {type(model).__name__} ({len(matched)} of "
            f"{len(target)}): start from a checkpoint of the same architecture (--model)"
        )
    model.load_state_dict(matched, strict=False)
    return sorted(set(target) - set(matched))


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


def run_at_size(model: nn.Module, size: tuple[int, int]) -> None:
    """Run ``model`` at image ``size`` when it differs from its own (``--image-size``): learned positions
    resampled, as timm's ``set_input_size``; a model that cannot is refused in one line."""
    own = getattr(getattr(model, "config", None), "img_size", size)
    if tuple(own) == tuple(size):
        return
    set_image_size = getattr(model, "set_image_size", None)
    if set_image_size is None:
        raise ConfigError(f"{type(model).__name__} runs at {tuple(own)} only; drop --image-size {size[0]}")
    set_image_size(tuple(size))


def pretrained_cfg(model: nn.Module, data: DataConfig) -> dict[str, Any]:
    """timm's ``pretrained_cfg`` for ``model`` fed as ``data`` says: input size, resize and crop
    (interpolation, crop_pct, crop_mode), mean, std, classes."""
    return {
        "input_size": (data.in_chans, *data.image_size),
        "mean": tuple(data.mean),
        "std": tuple(data.std),
        "num_classes": getattr(getattr(model, "config", None), "num_classes", len(data.classes)),
        "label_names": list(data.classes),
        "interpolation": data.interpolation,
        "crop_pct": data.crop_pct,
        "crop_mode": data.crop_mode,
    }


def create_model(name: str, checkpoint_path: str | Path | None = None, **overrides: Any) -> nn.Module:
    """:func:`vitlab.models.build_registered` (``name`` with config ``overrides``), then, with
    ``checkpoint_path``, every weight of that checkpoint (any source :func:`load_checkpoint` reads),
    strictly: a checkpoint that does not fit the model exactly is refused. As timm's ``create_model``.
    The model carries ``pretrained_cfg`` from the checkpoint's data config."""
    model = build_registered(name, **overrides)
    if checkpoint_path is not None:
        loaded = load_checkpoint(checkpoint_path)
        source, target = loaded.model.state_dict(), model.state_dict()
        wrong = sorted(
            k
            for k in set(source) | set(target)
            if k not in source or k not in target or source[k].shape != target[k].shape
        )
        if wrong:
            raise CheckpointError(
                f"{loaded.path} does not fit {name} ({len(wrong)} tensors missing, extra or of "
                f"another shape, e.g. {wrong[0]}): name the architecture it was trained as, or "
                f"pass its config fields"
            )
        model.load_state_dict(source)
        model.pretrained_cfg = pretrained_cfg(model, loaded.data)  # type: ignore[assignment]
    return model
