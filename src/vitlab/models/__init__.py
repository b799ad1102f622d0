"""Models and the registry of named configurations: each model's module registers its builder and names.

- ``vit``: :class:`VisionTransformer` (the textbook's ``vit-seed``, ``vit-digits``, timm's ViT-Ti/S/B);
  ``vit_config``: its :class:`ViTConfig`; ``distilled``: DeiT students; ``tome``: token merging.
- ``cnn``: plain conv3x3-BN-ReLU baselines sized to match the ViTs (``cnn-seed``, ``cnn-digits``).
- ``swin``: hierarchical windowed attention (Swin-T and small Swins for 28x28 and 32x32).
- ``dense``: a backbone's intermediate maps with a segmentation or detection head.
- ``promptable``: promptable segmentation (SAM-style): a ViT image encoder, point and box prompts, a
  two-way mask decoder.
- ``clip``: a small CLIP, a ViT image tower and a word-level text tower (``clip-shapes``).
- ``registry``: :func:`build_registered` builds a registered name; :func:`get_config`, :func:`list_models`.
"""

from .clip import CLIPConfig, CLIPModel
from .cnn import CNNConfig, SimpleCNN, cnn_for_budget, count_params
from .dense import DenseConfig, DenseModel
from .distilled import distilled_from
from .promptable import PromptableConfig, PromptableModel
from .registry import (
    build_registered,
    describe_model,
    describe_models,
    get_config,
    list_models,
    register_builder,
    register_model,
)
from .swin import SwinConfig, SwinStage, SwinTransformer
from .tome import TokenMergingViT, apply_tome, front_loaded
from .vit import VisionTransformer
from .vit_config import ViTConfig

__all__ = [
    "build_registered",
    "describe_model",
    "describe_models",
    "distilled_from",
    "get_config",
    "list_models",
    "register_builder",
    "register_model",
    "ViTConfig",
    "VisionTransformer",
    "CNNConfig",
    "SimpleCNN",
    "cnn_for_budget",
    "count_params",
    "SwinConfig",
    "SwinStage",
    "SwinTransformer",
    "TokenMergingViT",
    "apply_tome",
    "front_loaded",
    "DenseConfig",
    "DenseModel",
    "PromptableConfig",
    "PromptableModel",
    "CLIPConfig",
    "CLIPModel",
]
