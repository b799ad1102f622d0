"""Neural-network layers, one concept per file."""
from .attention import MultiHeadSelfAttention
from .block import Block, PostNormBlock
from .drop import DropPath, LayerScale, drop_path
from .mlp import MLP
from .patch_embed import PatchEmbedding, conv_weight_to_linear, linear_weight_to_conv
from .position import (POSITION_KINDS, LearnedPosition, NoPosition, Rotary2d, RowColumnPosition,
                       SinCosPosition, build_position)

__all__ = [
    "MultiHeadSelfAttention", "Block", "PostNormBlock", "DropPath", "LayerScale", "drop_path", "MLP",
    "PatchEmbedding", "conv_weight_to_linear", "linear_weight_to_conv", "POSITION_KINDS",
    "LearnedPosition", "NoPosition", "Rotary2d", "RowColumnPosition", "SinCosPosition", "build_position",
]
