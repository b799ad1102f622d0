"""Models of other libraries, read with their own preprocessing: a timm or Hugging Face state dict (``.safetensors``,
``.pth``, ``.bin``; a timm ``pretrained_cfg`` in a ``config.json`` beside it or in its metadata), a Hugging Face
``save_pretrained`` folder (with its ``preprocessor_config.json``), a Keras ``.keras`` file. What must be guessed is
returned in ``Loaded.guessed``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data.config import DataConfig
from ..data.preprocess import Preprocess
from ..errors import CheckpointError, ConfigError
from ..interop.checkpoint import foreign_model, read_state_dict
from ..interop.hf import hf_config_fields
from ..interop.schema import HFModelConfig, HFProcessorConfig, TimmConfig, TimmPretrainedCfg, read_json
from ..interop.timm.config import timm_fields, timm_label_names
from ..models.registry import build_registered
from ..ops.patches import _pair
from .checkpoint import metadata_value, read_safetensors
from .loaded import Loaded

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def is_hf_folder(path: Path) -> bool:
    """A Hugging Face ``save_pretrained`` folder: ``config.json`` naming a ``model_type``, and weights."""
    config = path / "config.json"
    if not config.is_file() or not any((path / n).is_file() for n in HF_WEIGHTS):
        return False
    try:
        return "model_type" in json.loads(config.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, TypeError):
        return False


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


def _processor(path: Path) -> dict[str, Any] | None:
    """The checked fields of the ``preprocessor_config.json`` at ``path``, None when there is none."""
    return HFProcessorConfig.read(path).fields if path.is_file() else None


def _timm_config(path: Path, raw: dict[str, str]) -> dict[str, Any] | None:
    """timm's config for the weights at ``path``: the file's ``pretrained_cfg`` metadata (the whole
    ``config.json`` or its ``pretrained_cfg`` alone), else a timm ``config.json`` beside it."""
    if "pretrained_cfg" in raw:
        value = metadata_value(raw, "pretrained_cfg", path)
        where = f"{path}: metadata 'pretrained_cfg'"
        if isinstance(value, dict) and "pretrained_cfg" in value:
            return TimmConfig.from_json(where, value).fields
        return {"pretrained_cfg": TimmPretrainedCfg.from_json(where, value).fields}
    sibling = path.with_name("config.json")
    if not sibling.is_file():
        return None
    config = read_json(sibling)
    if isinstance(config, dict) and "model_type" in config:
        return None
    config = TimmConfig.from_json(sibling, config).fields
    return config if "pretrained_cfg" in config or "architecture" in config else None


def load_foreign(
    path: Path,
    tensors: dict[str, torch.Tensor],
    raw: dict[str, str],
    name: str | None,
    img_size: int | tuple[int, int] | None,
    config: dict[str, Any],
) -> Loaded:
    """The model of the timm or Hugging Face state dict at ``path`` (its ``tensors`` and ``raw`` metadata):
    ``name`` a registered architecture to load into, ``config`` fields the weights do not record, ``img_size`` a size
    to run it at; its data config from the file's own preprocessing, what is guessed said in ``guessed``."""
    if not tensors:
        raise CheckpointError(f"{path} holds no tensors")
    known = dict(config)
    if name is not None:
        arch_config: Any = build_registered(name).config
        arch = arch_config.to_dict()
        known = {**{k: v for k, v in arch.items() if k not in ("img_size",)}, **known}
    if "vitlab_model_config" in raw:  # a timm file written by `vitlab convert --to timm`
        known = {**metadata_value(raw, "vitlab_model_config", path), **known}
    timm = _timm_config(path, raw) if "vitlab_data" not in raw else None
    timm_notes: dict[str, str] = {}
    if timm is not None and "patch_embed.proj.weight" in tensors:
        fields_, timm_notes = timm_fields(timm, tensors["patch_embed.proj.weight"].shape[0])
        timm_notes = {k: v for k, v in timm_notes.items() if k not in known}
        known = {**fields_, **known}
    net, source, guessed = foreign_model(tensors, raw, path, img_size, known)
    guessed = {**guessed, **timm_notes}
    if "vitlab_data" in raw:
        data, data_guesses = DataConfig.from_dict(metadata_value(raw, "vitlab_data", path)), dict[str, str]()
        kind = metadata_value(raw, "vitlab_kind", path) if "vitlab_kind" in raw else "classifier"
    elif source == "hf":
        pre, notes = _hf_preprocess(net, _processor(path.with_name("preprocessor_config.json")))
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


def load_hf_folder(path: Path, img_size: int | tuple[int, int] | None, config: dict[str, Any]) -> Loaded:
    """The model of the Hugging Face ``save_pretrained`` folder ``path``, with its preprocessing and class names."""
    from ..interop.keymaps import hf_to_vitlab
    from ..interop.state import model_from_state

    hf_config = HFModelConfig.read(path / "config.json").fields
    weights = next(path / n for n in HF_WEIGHTS if (path / n).is_file())
    tensors = read_safetensors(weights)[0] if weights.suffix == ".safetensors" else read_state_dict(weights)[0]
    net, guessed = model_from_state(
        hf_to_vitlab(tensors), resize_to=img_size, **{**hf_config_fields(hf_config), **config}
    )
    pre, notes = _hf_preprocess(net, _processor(path / "preprocessor_config.json"))
    data, data_guesses = _foreign_data(net, pre, notes)
    labels = hf_config.get("id2label")
    if isinstance(labels, dict) and len(labels) == net.config.num_classes:
        data.classes = [str(labels.get(str(i), labels.get(i, i))) for i in range(len(labels))]
    return Loaded(net, data, "classifier", None, {"source": "hf"}, path, {**guessed, **data_guesses})


def load_keras(path: Path) -> Loaded:
    """The model of the Keras ``.keras`` file at ``path`` (inputs in [0, 1], as the textbook's Keras model)."""
    from ..interop.keras import from_keras
    from ..interop.keras.graph import import_keras

    keras = import_keras()  # Keras on torch unless KERAS_BACKEND names another

    net = from_keras(keras.saving.load_model(path, compile=False))
    chans = net.config.in_chans
    pre = Preprocess(net.config.img_size, chans, mean=(0.0,) * chans, std=(1.0,) * chans)  # type: ignore[arg-type]
    data, _ = _foreign_data(net, pre)
    guesses = {"mean/std": "pixels in [0, 1] unscaled (the textbook's Keras preprocessing)"}
    return Loaded(net, data, "classifier", None, {"source": "keras"}, path, guesses)
