"""Neural-network layers, one concept per file."""

from .attention import ATTENTION_KINDS, MultiHeadSelfAttention
from .block import Block, PostNormBlock, build_attention
from .conv_stem import ConvStem, ResNetStem
from .drop import DropPath, LayerScale, drop_path
from .efficient_attention import LatentAttention, LinearAttention, LowRankAttention
from .hybrid_embed import STEMS, HybridEmbedding
from .mlp import MLP
from .patch_embed import PatchEmbedding, conv_weight_to_linear, linear_weight_to_conv
from .patch_merging import PatchMerging
from .position import (
    POSITION_KINDS,
    LearnedPosition,
    NoPosition,
    Rotary2d,
    RowColumnPosition,
    SinCosPosition,
    build_position,
)
from .relative_position import REL_POS_KINDS, RelativePositionBias
from .sparse_attention import SparseAttention
from .window_attention import WindowAttention

__all__ = [
    "MultiHeadSelfAttention",
    "Block",
    "PostNormBlock",
    "DropPath",
    "LayerScale",
    "drop_path",
    "MLP",
    "PatchEmbedding",
    "conv_weight_to_linear",
    "linear_weight_to_conv",
    "POSITION_KINDS",
    "LearnedPosition",
    "NoPosition",
    "Rotary2d",
    "RowColumnPosition",
    "SinCosPosition",
    "build_position",
    "ATTENTION_KINDS",
    "build_attention",
    "WindowAttention",
    "LinearAttention",
    "LowRankAttention",
    "LatentAttention",
    "PatchMerging",
    "SparseAttention",
    "REL_POS_KINDS",
    "RelativePositionBias",
    "STEMS",
    "HybridEmbedding",
    "ConvStem",
    "ResNetStem",
]
