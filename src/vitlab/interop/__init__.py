"""Weights in and out of vitlab: timm, Hugging Face, the textbook's Keras ViT, checkpoint files.

    from_timm(module)            timm VisionTransformer        -> VisionTransformer
                                 timm SwinTransformer          -> SwinTransformer (from_timm_swin)
    from_hf(module)              HF ViTForImageClassification  -> VisionTransformer
    from_keras(model)            the textbook's Keras ViT      -> VisionTransformer
    to_timm_state_dict(model)    VisionTransformer -> timm state dict (build with timm_kwargs(config))
    read_state_dict(path)        a timm / HF weights file      -> tensors (no code runs)
    foreign_model(tensors, ...)  those tensors                 -> VisionTransformer and what was guessed

vitlab's own checkpoint format and ``load_checkpoint`` (any source) are :mod:`vitlab.runs`.

None of them imports timm, transformers or keras: they read the objects they are given.
"""
from .checkpoint import foreign_model, read_state_dict, write_state_dict
from .hf import from_hf, hf_config_fields
from .keras import from_keras
from .keymaps import detect_format, hf_key_scheme, hf_to_vitlab, infer_config, timm_to_vitlab, vitlab_to_timm
from .state import load_state_dict, model_from_state
from .timm import from_timm, timm_config, timm_kwargs, to_timm_state_dict
from .timm_swin import from_timm_swin, timm_swin_config, timm_swin_to_vitlab

__all__ = [
    "from_timm", "from_hf", "from_keras", "to_timm_state_dict", "timm_kwargs", "timm_config", "hf_config_fields",
    "load_state_dict", "model_from_state", "infer_config", "detect_format", "hf_key_scheme", "timm_to_vitlab",
    "vitlab_to_timm", "hf_to_vitlab", "read_state_dict", "write_state_dict", "foreign_model", "from_timm_swin", "timm_swin_config", "timm_swin_to_vitlab",
]
