"""Checkpoint files: read timm / Hugging Face / vitlab weights, write vitlab or timm ones.

Files are safetensors, or torch files read with ``torch.load(weights_only=True)`` (no code
runs). A vitlab checkpoint is a safetensors file whose metadata carries the model's
:class:`ViTConfig` as JSON under ``vitlab_config``, so :func:`load_checkpoint` rebuilds the
model from the file alone. Other files give their config from shapes (see
:func:`vitlab.interop.infer_config`), from a Hugging Face ``config.json`` beside the file, or
from fields passed by the caller.
"""
from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ..models.vit import ViTConfig, VisionTransformer
from .hf import HF_LAYERNORM_EPS, hf_config_fields
from .keymaps import StateDict, detect_format, hf_to_vitlab, timm_to_vitlab
from .state import model_from_state
from .timm import to_timm_state_dict

CONFIG_KEY = "vitlab_config"
SOURCES = ("auto", "timm", "hf", "vitlab")
TARGETS = ("vitlab", "timm")
_WRAPPERS = ("state_dict", "model", "module")


def _is_state_dict(obj: Any) -> bool:
    return isinstance(obj, dict) and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items())


def read_state_dict(path: str | Path) -> tuple[StateDict, dict[str, str]]:
    """The tensors of a checkpoint file and its metadata (safetensors only, else ``{}``).

    A torch file may wrap its state dict in ``{"state_dict" | "model" | "module": ...}``; a
    ``module.`` prefix (DistributedDataParallel) is removed.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint file at {path}")
    if path.suffix == ".safetensors":
        with safe_open(str(path), framework="pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError) as err:
        raise ValueError(f"{path} cannot be read as a torch file with weights_only=True ({str(err).splitlines()[0]}): "
                         f"save its state_dict() alone, or as safetensors") from err
    while isinstance(obj, dict) and not _is_state_dict(obj):
        inner = next((obj[k] for k in _WRAPPERS if isinstance(obj.get(k), dict)), None)
        if inner is None:
            raise ValueError(f"{path} holds a dict with keys {sorted(obj)[:6]}, not a state dict of tensors")
        obj = inner
    if not _is_state_dict(obj):
        raise ValueError(f"{path} holds a {type(obj).__name__}, not a state dict of tensors")
    if obj and all(k.startswith("module.") for k in obj):
        obj = {k[len("module."):]: v for k, v in obj.items()}
    return obj, {}


def write_state_dict(state: StateDict, path: str | Path, metadata: dict[str, str] | None = None) -> None:
    """Write tensors as safetensors (``.safetensors``, with ``metadata``) or a torch file (other suffixes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".safetensors":
        save_file({k: v.detach().contiguous() for k, v in state.items()}, str(path),
                  metadata={"format": "pt", **(metadata or {})})
    elif metadata:
        raise ValueError(f"{path}: metadata needs a .safetensors file")
    else:
        torch.save({k: v.detach() for k, v in state.items()}, path)


def _check_vitlab_path(path: str | Path) -> None:
    if Path(path).suffix != ".safetensors":
        raise ValueError(f"a vitlab checkpoint is a .safetensors file (it carries the config), got {path}")


def save_checkpoint(model: VisionTransformer, path: str | Path) -> None:
    """Write ``model`` as a vitlab safetensors checkpoint carrying its config."""
    _check_vitlab_path(path)
    write_state_dict(model.state_dict(), path, {CONFIG_KEY: json.dumps(model.config.to_dict())})


def _load(path: str | Path, source: str, img_size: int | tuple[int, int] | None,
          config: dict[str, Any]) -> tuple[VisionTransformer, str, dict[str, str], int]:
    """The model in ``path``, the source format, the guessed config fields and the file's tensor count."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    state, meta = read_state_dict(path)
    count = len(state)
    if source == "auto":
        source = "vitlab" if CONFIG_KEY in meta else detect_format(state)
        if source is None:
            raise ValueError(f"{path} holds no ViT weights vitlab recognises (keys {', '.join(sorted(state)[:4])}, "
                             f"...): name the source format with source='timm' | 'hf' | 'vitlab'")
    known, guessed = dict(config), {}
    if source == "vitlab" and CONFIG_KEY in meta:
        known = {**ViTConfig.from_dict(json.loads(meta[CONFIG_KEY])).to_dict(), **config}
    elif source == "timm":
        state = timm_to_vitlab(state)
    elif source == "hf":
        sibling = Path(path).with_name("config.json")
        if sibling.is_file():
            known = {**hf_config_fields(json.loads(sibling.read_text())), **config}
        elif "norm_eps" not in known:
            known["norm_eps"] = HF_LAYERNORM_EPS
            guessed["norm_eps"] = f"{HF_LAYERNORM_EPS} (Hugging Face ViT's default; no config.json beside the file)"
        state = hf_to_vitlab(state)
    model, inferred = model_from_state(state, resize_to=img_size, **known)
    return model, source, {**guessed, **inferred}, count


def load_checkpoint(path: str | Path, source: str = "auto", img_size: int | tuple[int, int] | None = None,
                    **config: Any) -> VisionTransformer:
    """Build the model a checkpoint file holds (vitlab, timm or Hugging Face), in eval mode.

    Args:
        source: ``"auto"`` (by metadata and key names), ``"timm"``, ``"hf"`` or ``"vitlab"``.
        img_size: run at this image size, resampling learned positions.
        **config: :class:`ViTConfig` fields the file does not record (e.g. ``num_heads``).
    """
    return _load(path, source, img_size, config)[0]


@dataclass
class Conversion:
    """What :func:`convert_file` did."""
    src: str
    dst: str
    source: str
    target: str
    config: ViTConfig
    num_params: int
    num_tensors: int
    guessed: dict[str, str] = field(default_factory=dict)


def convert_file(src: str | Path, dst: str | Path, source: str = "auto", target: str = "vitlab",
                 img_size: int | tuple[int, int] | None = None, **config: Any) -> Conversion:
    """Convert a checkpoint file: ``target="vitlab"`` writes a vitlab safetensors checkpoint,
    ``"timm"`` a timm ``VisionTransformer`` state dict (safetensors or torch file by suffix).

    Arguments are those of :func:`load_checkpoint`.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    if target == "vitlab":
        _check_vitlab_path(dst)
    model, source, guessed, count = _load(src, source, img_size, config)
    if target == "vitlab":
        save_checkpoint(model, dst)
    else:
        write_state_dict(to_timm_state_dict(model), dst)
    return Conversion(str(src), str(dst), source, target, model.config,
                      sum(p.numel() for p in model.parameters()), count, guessed)
