"""Weights in and out of vitlab: timm, Hugging Face, the textbook's Keras ViT, checkpoint files.

    from_timm(module)            timm VisionTransformer        -> VisionTransformer
                                 timm SwinTransformer          -> SwinTransformer (from_timm_swin)
    from_hf(module)              HF ViTForImageClassification  -> VisionTransformer
    from_keras(model)            a functional Keras ViT (images or patch tokens in) -> VisionTransformer
    to_timm_state_dict(model)    VisionTransformer -> timm state dict (build with timm_kwargs(config))
    to_hf_state_dict(model)      class-token ViT   -> HF ViTForImageClassification state dict (hf_config_json)
    export_onnx / export_hf / export_timm         a model -> an .onnx file, an HF folder, a timm folder
    read_state_dict(path)        a timm / HF weights file      -> tensors (no code runs)
    foreign_model(tensors, ...)  those tensors                 -> VisionTransformer and what was guessed

vitlab's own checkpoint format and ``load_checkpoint`` (any source) are :mod:`vitlab.runs`.

None of them imports timm or transformers: they read the objects they are given (from_keras runs
the Keras model it is given to check its reading).
"""

from .checkpoint import foreign_model, read_state_dict, write_state_dict
from .export import export_hf, export_onnx, export_timm
from .hf import check_hf_exportable, from_hf, hf_config_fields, hf_config_json, to_hf_state_dict
from .keras import from_keras
from .keymaps import detect_format, hf_key_scheme, hf_to_vitlab, infer_config, timm_to_vitlab, vitlab_to_timm
from .state import load_state_dict, model_from_state
from .timm import from_timm, timm_config, timm_kwargs, to_timm_state_dict
from .timm.swin import from_timm_swin, timm_swin_config, timm_swin_to_vitlab

__all__ = [
    "from_timm",
    "from_hf",
    "from_keras",
    "to_timm_state_dict",
    "timm_kwargs",
    "timm_config",
    "hf_config_fields",
    "load_state_dict",
    "model_from_state",
    "infer_config",
    "detect_format",
    "hf_key_scheme",
    "timm_to_vitlab",
    "vitlab_to_timm",
    "hf_to_vitlab",
    "read_state_dict",
    "write_state_dict",
    "foreign_model",
    "from_timm_swin",
    "timm_swin_config",
    "timm_swin_to_vitlab",
    "to_hf_state_dict",
    "hf_config_json",
    "check_hf_exportable",
    "export_onnx",
    "export_hf",
    "export_timm",
]
