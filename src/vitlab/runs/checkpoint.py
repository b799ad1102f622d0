"""The one checkpoint format: writing it (:func:`save_checkpoint`), reading a safetensors file with its checksum
verified (:func:`read_safetensors`), and rebuilding the model of a vitlab file (:func:`load_vitlab`).

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

Files vitlab wrote before this format (metadata ``config`` or ``vitlab_config``, dense ``dense_config``) still
load. Any other source (run folders, foreign files, hub ids) is read by :func:`vitlab.runs.load.load_checkpoint`.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as safetensors_save
from torch import nn

from .. import __version__
from ..data.config import DataConfig
from ..errors import CheckpointError, ConfigError
from ..models.registry import build_from_config, build_registered, list_models
from .files import atomic_write
from .kinds import checkpoint_kinds
from .loaded import Loaded

FORMAT, FORMAT_VERSION = "vitlab", 1
MAX_HEADER = 100 * 2**20  # a safetensors header above 100 MB is not a checkpoint


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
    header, body = json.loads(blob[8 : 8 + n]), _tensor_bytes(blob)  # tensor offsets count from the body
    header["__metadata__"]["sha256"] = json.dumps(hashlib.sha256(body).hexdigest())
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors keeps the body 8-byte aligned
    return b"".join((struct.pack("<Q", len(text)), text, body))


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


def _tensor_bytes(blob: bytes) -> memoryview:
    """The tensor bytes of safetensors ``blob`` (after its header), a view: hashing them copies nothing."""
    (n,) = struct.unpack("<Q", blob[:8])
    return memoryview(blob)[8 + n :]


def recorded_epoch(path: Path) -> int | None:
    """The epoch the checkpoint at ``path`` records in its provenance, from its header alone (``None``: absent
    or unreadable)."""
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(min(n, 1 << 24)))
        epoch = json.loads(header["__metadata__"]["provenance"]).get("epoch")
    except (OSError, struct.error, ValueError, KeyError, TypeError, AttributeError):
        return None
    return epoch if isinstance(epoch, int) else None


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
        expected = metadata_value(raw_meta, "sha256", path)
        if hashlib.sha256(_tensor_bytes(blob)).hexdigest() != expected:
            raise CheckpointError(
                f"{path} is corrupt: its tensor bytes do not match the recorded SHA-256; "
                f"restore it from a copy or retrain"
            )
    return tensors, dict(raw_meta)


def metadata_value(meta: dict[str, str], key: str, path: Path) -> Any:
    """The JSON value of metadata ``key`` of the file at ``path``; a value that is not JSON is refused."""
    try:
        return json.loads(meta[key])
    except (TypeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path}: metadata {key!r} is not JSON ({err})") from err


def is_vitlab(raw: dict[str, str]) -> bool:
    """Whether safetensors metadata ``raw`` is vitlab's: this format, or a file vitlab wrote before it."""
    return raw.get("format") == json.dumps(FORMAT) or any(k in raw for k in ("config", "vitlab_config", "dense_config"))


def load_vitlab(path: Path, tensors: dict[str, torch.Tensor], raw: dict[str, str]) -> Loaded:
    """The model of the vitlab file at ``path`` (its ``tensors`` and ``raw`` metadata), built from its recorded
    config and filled with every weight; weights that do not fit that config are refused."""
    meta = {k: metadata_value(raw, k, path) for k in raw if k != "format" or raw[k].startswith('"')}
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
