"""Pure tensor functions: patches, attention math, position tables."""

from .attention import attention_weights, merge_heads, scaled_dot_product_attention, split_heads
from .patches import check_divisible, num_tokens, pad_to_multiple, patchify, unpatchify
from .positions import apply_rotary, resample_grid, rotary_2d_angles, sincos_1d, sincos_2d

__all__ = [
    "attention_weights",
    "merge_heads",
    "scaled_dot_product_attention",
    "split_heads",
    "check_divisible",
    "num_tokens",
    "pad_to_multiple",
    "patchify",
    "unpatchify",
    "apply_rotary",
    "resample_grid",
    "rotary_2d_angles",
    "sincos_1d",
    "sincos_2d",
]
