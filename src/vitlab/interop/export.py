"""A vitlab model for other runtimes: ONNX, Hugging Face, timm.

    export_onnx(model, path, data)          any image model -> one .onnx file: input "images" (B, C, H, W),
                                            output "logits" (B, classes), B free; the data config's
                                            preprocessing in its metadata ("pretrained_cfg", "vitlab.preprocess")
    export_hf(model, folder, classes, data) class-token ViT -> config.json + model.safetensors (+ given
                                            ``data``, a preprocessor_config.json computing its eval transform):
                                            transformers.ViTForImageClassification.from_pretrained
    export_timm(model, folder, data)        ViT -> timm's folder layout, config.json (architecture,
                                            model_args, pretrained_cfg) + model.safetensors:
                                            timm.create_model("local-dir:" + folder, pretrained=True)
    timm_config_json(model, data)           that config.json (``vitlab convert --to timm X.pth`` writes it
                                            beside a torch state dict: timm_config_beside, write_timm_config)

``data`` is the model's :class:`~vitlab.data.DataConfig`. Each writes only what the target computes exactly
(the model to float tolerance, the preprocessing pixel for pixel: :meth:`~vitlab.data.DataConfig.exact_in`)
and refuses the rest with a :class:`~vitlab.errors.ConfigError` naming the option; an existing target is kept unless
``overwrite=True``. None imports transformers or timm; ONNX export needs ``onnx`` and ``onnxscript``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from ..data.config import DataConfig
from ..errors import ConfigError, RunFolderError, require
from ..models.vit import VisionTransformer
from ..ops.patches import _pair
from .hf import hf_config_json, to_hf_state_dict
from .timm import timm_kwargs, to_timm_state_dict
from .timm.encoder import TIMM_LAYERNORM_EPS

ONNX_OPSET = 18
WEIGHTS = "model.safetensors"
TIMM_ARCHITECTURE = "vit_base_patch16_224"  # any timm ViT entry point: model_args set every size


def _free(*paths: Path, overwrite: bool) -> None:
    taken = [str(p) for p in paths if p.exists()]
    if taken and not overwrite:
        raise RunFolderError(
            f"{', '.join(taken)} {'exists' if len(taken) == 1 else 'exist'}: choose another path "
            f"or pass overwrite=True (--overwrite)"
        )


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n")


def _vit(model: nn.Module, target: str) -> VisionTransformer:
    if not isinstance(model, VisionTransformer):
        raise ConfigError(
            f"{target} export writes a VisionTransformer; this model is a {type(model).__name__}: "
            f"export it to ONNX instead"
        )
    return model


@torch.no_grad()
def export_onnx(
    model: nn.Module,
    path: str | Path,
    data: DataConfig,
    opset: int = ONNX_OPSET,
    overwrite: bool = False,
) -> Path:
    """Write ``model`` (eval mode) as an ONNX graph: ``images (B, C, H, W) -> logits`` at ``data``'s channels and
    size, batch size free, with ``data``'s preprocessing in the model's metadata: ``pretrained_cfg`` (timm's
    keys, JSON) and ``vitlab.preprocess`` (every field of :class:`~vitlab.data.preprocess.Preprocess`, JSON).

    Uses PyTorch's ``torch.export``-based exporter; weights are inside the one file.
    """
    require("onnxscript", "dev", "ONNX export")
    import onnx

    data.exact_in("onnx")
    image_size, in_chans = data.image_size, data.in_chans
    path = Path(path)
    _free(path, overwrite=overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    height, width = _pair(image_size, "image_size")
    images = torch.zeros(2, in_chans, height, width)  # batch 2: a size torch.export keeps symbolic
    was_training = model.training
    model.eval()
    try:
        torch.onnx.export(
            model,
            (images,),
            path,
            dynamo=True,
            opset_version=opset,
            input_names=["images"],
            output_names=["logits"],
            dynamic_shapes=({0: torch.export.Dim("batch")},),
            external_data=False,
            verbose=False,
        )
    finally:
        model.train(was_training)
    graph = onnx.load(str(path))
    outputs = getattr(getattr(model, "config", None), "num_classes", None)
    onnx.helper.set_model_props(
        graph,
        {
            "pretrained_cfg": json.dumps(data.pretrained_cfg(outputs)),
            "vitlab.preprocess": json.dumps(data.preprocess().to_dict()),
        },
    )
    onnx.save(graph, str(path))
    return path


def export_hf(
    model: nn.Module,
    folder: str | Path,
    class_names: Sequence[str],
    data: DataConfig | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a Hugging Face ``ViTForImageClassification`` folder computing ``model``'s logits.

    Args:
        class_names: one per output (``id2label``); empty for ``"0", "1", ...``.
        data: the model's data config; given, a ``preprocessor_config.json`` whose image processor computes
            its eval transform exactly (:meth:`~vitlab.data.DataConfig.hf_processor`) is written too.

    Raises:
        ConfigError: for options Hugging Face's ViT cannot express (mean pooling, registers, ...), or
            preprocessing no transformers image processor reproduces.
    """
    vit = _vit(model, "Hugging Face")
    config = hf_config_json(vit.config, class_names)
    processor = None if data is None else data.hf_processor()
    folder = Path(folder)
    _free(folder / "config.json", folder / WEIGHTS, overwrite=overwrite)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(to_hf_state_dict(vit), str(folder / WEIGHTS), metadata={"format": "pt"})
    _write_json(folder / "config.json", config)
    if processor is not None:
        _write_json(folder / "preprocessor_config.json", processor)
    return folder


def timm_config_json(model: VisionTransformer, data_config: DataConfig) -> dict[str, Any]:
    """timm's ``config.json`` for ``model``: ``architecture``, ``model_args`` (every
    ``VisionTransformer`` argument) and ``pretrained_cfg`` (input size, mean, std, classes, and the resize
    and crop ``data_config`` records: interpolation, crop_pct, crop_mode); preprocessing timm's
    ``create_transform`` would not reproduce exactly is refused."""
    data_config.exact_in("timm")
    cfg = model.config
    if cfg.norm_eps != TIMM_LAYERNORM_EPS:
        raise ConfigError(
            f"norm_eps={cfg.norm_eps}: timm's config.json cannot hold a LayerNorm eps other than "
            f"{TIMM_LAYERNORM_EPS} (timm takes it as norm_layer=partial(nn.LayerNorm, eps=...)); export "
            f"to 'hf' (it records layer_norm_eps), or build timm's model with vitlab.interop.timm_kwargs"
        )
    args = {k: list(v) if isinstance(v, tuple) else v for k, v in timm_kwargs(cfg).items()}
    classes = [str(c) for c in data_config.classes] or [str(i) for i in range(cfg.num_classes)]
    return {
        "architecture": TIMM_ARCHITECTURE,
        "num_classes": cfg.num_classes,
        "num_features": cfg.embed_dim,
        "global_pool": args["global_pool"],
        "model_args": args,
        "label_names": classes,
        "pretrained_cfg": {
            "architecture": TIMM_ARCHITECTURE,
            "input_size": [cfg.in_chans, *_pair(cfg.img_size, "img_size")],
            "fixed_input_size": not cfg.dynamic_img_size,
            "interpolation": data_config.interpolation,
            "crop_pct": data_config.crop_pct,
            "crop_mode": data_config.crop_mode,
            "mean": list(data_config.mean),
            "std": list(data_config.std),
            "num_classes": cfg.num_classes,
            "first_conv": "patch_embed.proj",
            "classifier": "head",
        },
    }


TIMM_CONFIG = "config.json"


def timm_config_beside(weights: str | Path, config: dict[str, Any], overwrite: bool = False) -> Path:
    """Where timm's ``config.json`` for the torch state dict ``weights`` goes (beside it: what timm's hub layout
    and vitlab read a ``.pth`` / ``.pt`` / ``.bin`` with), checked before anything is written: a ``config.json``
    already there that is not ``config`` (another model's, or not timm's) is refused unless ``overwrite``."""
    place = Path(weights).with_name(TIMM_CONFIG)
    if place.exists() or place.is_symlink():
        try:
            same = place.is_file() and json.loads(place.read_text()) == json.loads(json.dumps(config))
        except (OSError, UnicodeDecodeError, ValueError):
            same = False
        if not same and not overwrite:
            raise RunFolderError(
                f"{place} exists and is not this model's timm config (a {Path(weights).suffix} file is read with "
                f"the config.json beside it): write {Path(weights).name} to another folder, or pass --overwrite"
            )
    return place


def write_timm_config(place: Path, config: dict[str, Any]) -> None:
    """Write timm's ``config.json`` (:func:`timm_config_json`) at ``place``."""
    _write_json(place, config)


def export_timm(model: nn.Module, folder: str | Path, data_config: DataConfig, overwrite: bool = False) -> Path:
    """Write ``model`` in timm's folder layout: ``model.safetensors`` (timm names, see
    :func:`~vitlab.interop.to_timm_state_dict`) and ``config.json`` (:func:`timm_config_json`).

    ``timm.create_model("local-dir:" + folder, pretrained=True)`` rebuilds it; so does
    ``timm.create_model(cfg["architecture"], pretrained=True, pretrained_cfg_overlay=dict(file=folder /
    "model.safetensors", **cfg["pretrained_cfg"]), **cfg["model_args"])``.
    """
    vit = _vit(model, "timm")
    config = timm_config_json(vit, data_config)
    state = to_timm_state_dict(vit)
    folder = Path(folder)
    _free(folder / TIMM_CONFIG, folder / WEIGHTS, overwrite=overwrite)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in state.items()}, str(folder / WEIGHTS), metadata={"format": "pt"})
    write_timm_config(folder / TIMM_CONFIG, config)
    return folder
