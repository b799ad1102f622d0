"""Foreign checkpoint files: read timm / Hugging Face state dicts, write plain state dicts.

Files are safetensors, or torch files read with ``torch.load(weights_only=True)`` (no code
runs). A foreign file gives its config from shapes (see :func:`vitlab.interop.infer_config`),
from a Hugging Face ``config.json`` beside it, or from fields passed by the caller. vitlab's own
format (config, data config and checksum in the metadata) is :mod:`vitlab.runs.checkpoint`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ..errors import CheckpointError, ConfigError
from ..models.vit import VisionTransformer
from .hf import HF_LAYERNORM_EPS, hf_config_fields
from .keymaps import StateDict, detect_format, hf_to_vitlab, timm_to_vitlab
from .schema import HFModelConfig
from .state import model_from_state

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
    except Exception as err:  # the weights-only unpickler raises many types for a file that is not one
        detail = " ".join(str(err).split()[:30]) or type(err).__name__
        raise CheckpointError(
            f"{path} cannot be read as a torch file with weights_only=True ({detail}): "
            f"save its state_dict() alone, or as safetensors"
        ) from err
    while isinstance(obj, dict) and not _is_state_dict(obj):
        inner = next((obj[k] for k in _WRAPPERS if isinstance(obj.get(k), dict)), None)
        if inner is None:
            raise CheckpointError(f"{path} holds a dict with keys {sorted(obj)[:6]}, not a state dict of tensors")
        obj = inner
    if not _is_state_dict(obj):
        raise CheckpointError(f"{path} holds a {type(obj).__name__}, not a state dict of tensors")
    if obj and all(k.startswith("module.") for k in obj):
        obj = {k[len("module.") :]: v for k, v in obj.items()}
    return obj, {}


def write_state_dict(state: StateDict, path: str | Path, metadata: dict[str, str] | None = None) -> None:
    """Write tensors as safetensors (``.safetensors``, with ``metadata``) or a torch file (other suffixes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".safetensors":
        save_file(
            {k: v.detach().contiguous() for k, v in state.items()},
            str(path),
            metadata={"format": "pt", **(metadata or {})},
        )
    elif metadata:
        raise ConfigError(f"{path}: metadata needs a .safetensors file")
    else:
        torch.save({k: v.detach() for k, v in state.items()}, path)


def _num_patches(state: StateDict, img_size: Any) -> int | None:
    """The patch grid's size of a timm state dict at ``img_size`` (a known ``(H, W)``), else None."""
    weight = state.get("patch_embed.proj.weight")
    if weight is None or not isinstance(img_size, (tuple, list)) or len(img_size) != 2 or weight.ndim != 4:
        return None
    return (int(img_size[0]) // weight.shape[-2]) * (int(img_size[1]) // weight.shape[-1])


def foreign_model(
    state: StateDict,
    meta: dict[str, str],
    path: str | Path,
    img_size: int | tuple[int, int] | None,
    config: dict[str, Any],
) -> tuple[VisionTransformer, str, dict[str, str]]:
    """The ViT that a timm or Hugging Face state dict holds: ``(model, source, guessed)``.

    ``source`` is ``"timm"`` or ``"hf"`` (told apart by key names); ``config`` gives the fields the
    weights do not record; a Hugging Face ``config.json`` beside the file is read; ``guessed`` maps
    every field inferred from shapes or defaults to why (see :func:`~vitlab.interop.infer_config`).
    """
    source = detect_format(state)
    if source is None:
        raise CheckpointError(
            f"{path} holds no ViT weights vitlab recognises (keys {', '.join(sorted(state)[:4])}, ...): "
            f"expected a timm or Hugging Face ViT state dict"
        )
    known, guessed = dict(config), {}
    if source == "timm":
        state = timm_to_vitlab(state, _num_patches(state, known.get("img_size")))
    else:
        sibling = Path(path).with_name("config.json")
        if sibling.is_file():
            known = {**hf_config_fields(HFModelConfig.read(sibling).fields), **config}
        elif "norm_eps" not in known:
            known["norm_eps"] = HF_LAYERNORM_EPS
            guessed["norm_eps"] = f"{HF_LAYERNORM_EPS} (Hugging Face ViT's default; no config.json beside the file)"
        state = hf_to_vitlab(state)
    model, inferred = model_from_state(state, resize_to=img_size, **known)
    return model, source, {**guessed, **inferred}
