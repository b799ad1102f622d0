"""Models (ViT, CNN baseline) and the registry of named configurations."""

from .distilled import distilled_from
from .registry import (
    build_registered,
    describe_model,
    describe_models,
    get_config,
    list_models,
    register_builder,
    register_model,
)
from .vit import VisionTransformer, ViTConfig

register_builder(ViTConfig, VisionTransformer)

# The textbook's Keras model: 28x28x1, patch 7 -> 16 tokens of 49 values, Dense 49->64, learned
# 16x64 positions, 2 pre-norm blocks (4 heads of 16, MLP 64->128->64), LayerNorm on every token,
# mean over tokens, Dense 64->10.
VIT_SEED = ViTConfig(
    img_size=28,
    patch_size=7,
    in_chans=1,
    num_classes=10,
    embed_dim=64,
    depth=2,
    num_heads=4,
    mlp_ratio=2.0,
    pos_embed="learned",
    pool="mean",
    class_token=False,
    fc_norm=False,
)
register_model("vit-seed", VIT_SEED, "the textbook's Keras ViT for 28x28 greyscale (71,946 parameters)")
register_model(
    "vit-seed-sincos",
    ViTConfig(**{**VIT_SEED.to_dict(), "pos_embed": "sincos2d"}),
    "vit-seed with fixed 2-D sinusoidal positions",
)
# timm's order for a mean-pooled ViT: average the tokens, then one LayerNorm (fc_norm) -- the Keras listing
# normalises every token before averaging. Same 71,946 parameters; measured in benchmarks/RESULTS.md.
register_model(
    "vit-seed-fcnorm",
    ViTConfig(**{**VIT_SEED.to_dict(), "fc_norm": None}),
    "vit-seed with its final LayerNorm after the mean pool (timm's order)",
)
# vit-seed's budget spent on the small-data tricks of Lee, Lee & Song (2021): Shifted Patch
# Tokenization over 4x4 patches (49 tokens) and Locality Self-Attention, with an MLP of ratio 1.5
# to stay under vit-seed's 71,946 parameters (67,948). Train it with `--recipe small-data`.
register_model(
    "vit-seed-small-data",
    ViTConfig(**{**VIT_SEED.to_dict(), "patch_size": 4, "patch_embed": "spt", "attention": "lsa", "mlp_ratio": 1.5}),
    "vit-seed's size with shifted patches (4x4) and locality self-attention (67,948 parameters)",
)
register_model(
    "vit-digits",
    ViTConfig(
        img_size=8,
        patch_size=2,
        in_chans=1,
        num_classes=10,
        embed_dim=64,
        depth=4,
        num_heads=4,
        mlp_ratio=2.0,
        pool="mean",
        class_token=False,
        fc_norm=False,
    ),
    "a small ViT for scikit-learn's 8x8 digits (16 tokens of 4 pixels)",
)
for _size, (_dim, _heads) in {"tiny": (192, 3), "small": (384, 6), "base": (768, 12)}.items():
    register_model(
        f"vit-{_size}-patch16-224",
        ViTConfig(embed_dim=_dim, depth=12, num_heads=_heads),
        f"ViT-{_size[0].upper()}/16 at 224x224, timm-compatible shapes",
    )

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
]

# CNN baselines: plain conv3x3-BN-ReLU stages sized to match the ViTs they are compared with.
from .cnn import CNNConfig, SimpleCNN, cnn_for_budget, count_params  # noqa: E402

register_builder(CNNConfig, SimpleCNN)
register_model(
    "cnn-seed",
    CNNConfig(img_size=28, in_chans=1, num_classes=10, widths=(32, 64, 80)),
    "a three-stage convnet for 28x28 greyscale, sized to compare with vit-seed",
)
register_model(
    "cnn-digits",
    CNNConfig(img_size=8, in_chans=1, num_classes=10, widths=(40, 80, 160)),
    "a three-stage convnet for 8x8 digits, sized to compare with vit-digits",
)
__all__ += ["CNNConfig", "SimpleCNN", "cnn_for_budget", "count_params"]

# Hierarchical windowed attention and token merging.
from .swin import SwinConfig, SwinStage, SwinTransformer  # noqa: E402
from .tome import TokenMergingViT, apply_tome, front_loaded  # noqa: E402

register_builder(SwinConfig, SwinTransformer)
register_model(
    "swin-tiny-patch4-window7-224",
    SwinConfig(drop_path_rate=0.2),
    "Swin-T at 224x224 (4 stages of 2-2-6-2 blocks, windows of 7x7), timm-compatible shapes",
)
register_model(
    "swin-nano-patch2-window7-28",
    SwinConfig(
        img_size=28,
        patch_size=2,
        in_chans=1,
        num_classes=10,
        embed_dim=32,
        depths=(2, 2, 2),
        num_heads=(2, 4, 8),
        window_size=7,
    ),
    "a 3-stage Swin for 28x28 greyscale: grids 14, 7, 4 (7 padded to 8 before merging)",
)
register_model(
    "swin-nano-patch2-window4-32",
    SwinConfig(
        img_size=32,
        patch_size=2,
        in_chans=3,
        num_classes=10,
        embed_dim=32,
        depths=(2, 2, 2),
        num_heads=(2, 4, 8),
        window_size=4,
    ),
    "a 3-stage Swin for 32x32 colour: grids 16, 8, 4 in windows of 4x4",
)
__all__ += ["SwinConfig", "SwinStage", "SwinTransformer", "TokenMergingViT", "apply_tome", "front_loaded"]

# Dense models: a backbone's intermediate maps with a segmentation or detection head.
from .dense import DenseConfig, DenseModel  # noqa: E402

register_builder(DenseConfig, DenseModel)
__all__ += ["DenseConfig", "DenseModel"]

# Promptable segmentation (SAM-style): a ViT image encoder, point and box prompts, a two-way mask decoder.
from .promptable import PromptableConfig, PromptableModel  # noqa: E402

register_builder(PromptableConfig, PromptableModel)
__all__ += ["PromptableConfig", "PromptableModel"]

# A small CLIP: a ViT image tower and a word-level text tower (see models/clip.py).
from .clip import CLIPConfig, CLIPModel  # noqa: E402

register_builder(CLIPConfig, CLIPModel)
register_model(
    "clip-shapes", CLIPConfig(), "a small CLIP for captioned 32x32 shapes: a 4-block ViT and a 2-block text tower"
)
__all__ += ["CLIPConfig", "CLIPModel"]
