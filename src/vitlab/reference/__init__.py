"""A NumPy-only Vision Transformer: the oracle vitlab's torch code is tested against.

It mirrors the textbook's NumPy listings (patchify, linear vs strided-convolution embedding,
row + column positions, class token, pooling, multi-head self-attention, a pre-norm block) and
extends them to everything a vitlab ``VisionTransformer`` with absolute positions does:
sinusoidal tables, register tokens, mean / max pooling, fc-norm, ``depth`` blocks. Run it in
float64 to hold the torch model to ~1e-8.

**No torch here.** Every module in this folder imports only the standard library, NumPy and its
siblings (relative imports). ``import vitlab.reference`` still loads torch, because the parent
package ``vitlab/__init__.py`` does; to run the oracle where torch is absent (or to prove it does
not need torch, as ``tests/reference`` does in a fresh interpreter), load this folder as a
standalone package::

    import importlib.util, sys
    spec = importlib.util.spec_from_file_location(
        "vitlab_reference", "<path>/vitlab/reference/__init__.py",
        submodule_search_locations=["<path>/vitlab/reference"])
    ref = importlib.util.module_from_spec(spec); sys.modules[spec.name] = ref
    spec.loader.exec_module(ref)

or copy the folder anywhere and ``import reference``.
"""

from .attention import combine_heads, multihead_self_attention, softmax, split_heads
from .patches import conv2d_strided, linear_patch_embedding, patchify, sequence_length
from .positions import add_2d_position, prepend_tokens, sincos_1d, sincos_2d
from .vit import (
    add_positions,
    embed,
    encode,
    gelu,
    layer_norm,
    params_from_state_dict,
    pool_sequence,
    transformer_block,
    vit_forward,
)

__all__ = [
    "combine_heads",
    "multihead_self_attention",
    "softmax",
    "split_heads",
    "conv2d_strided",
    "linear_patch_embedding",
    "patchify",
    "sequence_length",
    "add_2d_position",
    "prepend_tokens",
    "sincos_1d",
    "sincos_2d",
    "add_positions",
    "embed",
    "encode",
    "gelu",
    "layer_norm",
    "params_from_state_dict",
    "pool_sequence",
    "transformer_block",
    "vit_forward",
]
