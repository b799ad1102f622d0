"""Models (ViT, CNN baseline) and the registry of named configurations."""
from .registry import create_model, describe_model, get_config, list_models, register_builder, register_model
from .vit import ViTConfig, VisionTransformer

register_builder(ViTConfig, VisionTransformer)

# The textbook's Keras model: 28x28x1, patch 7 -> 16 tokens of 49 values, Dense 49->64, learned
# 16x64 positions, 2 pre-norm blocks (4 heads of 16, MLP 64->128->64), LayerNorm on every token,
# mean over tokens, Dense 64->10.
VIT_SEED = ViTConfig(img_size=28, patch_size=7, in_chans=1, num_classes=10, embed_dim=64, depth=2,
                     num_heads=4, mlp_ratio=2.0, pos_embed="learned", pool="mean", class_token=False,
                     fc_norm=False)
register_model("vit-seed", VIT_SEED, "the textbook's Keras ViT for 28x28 greyscale (71,946 parameters)")
register_model("vit-seed-sincos", ViTConfig(**{**VIT_SEED.to_dict(), "pos_embed": "sincos2d"}),
               "vit-seed with fixed 2-D sinusoidal positions")
register_model("vit-digits", ViTConfig(img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=64,
                                       depth=4, num_heads=4, mlp_ratio=2.0, pool="mean", class_token=False,
                                       fc_norm=False),
               "a small ViT for scikit-learn's 8x8 digits (16 tokens of 4 pixels)")
for _size, (_dim, _heads) in {"tiny": (192, 3), "small": (384, 6), "base": (768, 12)}.items():
    register_model(f"vit-{_size}-patch16-224", ViTConfig(embed_dim=_dim, depth=12, num_heads=_heads),
                   f"ViT-{_size[0].upper()}/16 at 224x224, timm-compatible shapes")

__all__ = ["create_model", "describe_model", "get_config", "list_models", "register_builder",
           "register_model", "ViTConfig", "VisionTransformer"]

# CNN baselines (issue #2): plain conv3x3-BN-ReLU stages sized to match the ViTs they are compared with.
from .cnn import CNNConfig, SimpleCNN, cnn_for_budget, count_params  # noqa: E402

register_builder(CNNConfig, SimpleCNN)
register_model("cnn-seed", CNNConfig(img_size=28, in_chans=1, num_classes=10, widths=(32, 64, 80)),
               "a three-stage convnet for 28x28 greyscale, sized to compare with vit-seed")
register_model("cnn-digits", CNNConfig(img_size=8, in_chans=1, num_classes=10, widths=(40, 80, 160)),
               "a three-stage convnet for 8x8 digits, sized to compare with vit-digits")
__all__ += ["CNNConfig", "SimpleCNN", "cnn_for_budget", "count_params"]
