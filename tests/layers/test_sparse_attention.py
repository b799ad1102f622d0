"""Sparse attention: the pattern against a loop, fast path = explicit path = a NumPy reference, global tokens."""

import numpy as np
import pytest
import torch

from vitlab.explain import attention_weights
from vitlab.layers import MultiHeadSelfAttention, SparseAttention, build_attention
from vitlab.models import VisionTransformer, ViTConfig
from vitlab.ops.attention import sparse_pattern

PATTERNS = [(20, 2, 5, 0), (20, 0, 4, 3), (17, 3, 100, 1), (9, 1, 1, 2), (30, 7, 6, 0)]


def loop_pattern(tokens: int, local: int, stride: int, globals_: int) -> np.ndarray:
    allowed = np.zeros((tokens, tokens), dtype=bool)
    for i in range(tokens):
        for j in range(tokens):
            if i < globals_ or j < globals_:
                allowed[i, j] = True
            else:
                offset = (i - globals_) - (j - globals_)
                allowed[i, j] = abs(offset) <= local or offset % stride == 0
    return allowed


def numpy_attention(q, k, v, allowed):
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    scores = np.where(allowed, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return weights @ v, weights


@pytest.mark.parametrize("tokens, local, stride, globals_", PATTERNS)
def test_pattern_is_band_or_stride_or_global(tokens, local, stride, globals_):
    expected = loop_pattern(tokens, local, stride, globals_)
    assert np.array_equal(sparse_pattern(tokens, local, stride, globals_).numpy(), expected)


@torch.no_grad()
@pytest.mark.parametrize("tokens, local, stride, globals_", PATTERNS)
def test_fast_and_explicit_paths_equal_a_numpy_reference(tokens, local, stride, globals_):
    torch.manual_seed(0)
    layer = SparseAttention(16, 2, grid=(4, 5), local=local, stride=stride, global_tokens=globals_).double().eval()
    x = torch.randn(2, tokens, 16, dtype=torch.float64)
    fast = layer(x)
    explicit, weights = layer.forward_with_weights(x)
    assert (fast - explicit).abs().max() <= 1e-6
    allowed = loop_pattern(tokens, local, stride, globals_)
    q, k, v = (t.numpy() for t in layer.qkv_heads(x))
    out, expected = numpy_attention(q, k, v, allowed)
    np.testing.assert_allclose(weights.numpy(), expected, atol=1e-12)
    assert not weights[..., ~torch.from_numpy(allowed)].any()  # nothing outside the pattern
    merged = torch.from_numpy(out).transpose(1, 2).flatten(2)
    np.testing.assert_allclose(explicit.numpy(), layer.proj(merged).numpy(), atol=1e-12)


def test_the_pattern_is_built_once_per_token_count():
    layer = SparseAttention(8, 2, grid=(3, 3), local=1, stride=3)
    first = layer.allowed(9, torch.device("cpu"))
    assert layer.allowed(9, torch.device("cpu")) is first
    assert layer.allowed(10, torch.device("cpu")).shape == (10, 10)


@torch.no_grad()
def test_a_pattern_covering_every_pair_is_full_attention():
    torch.manual_seed(0)
    sparse = build_attention("sparse", 16, 2, grid=(3, 3), sparse_local=8, sparse_stride=1).eval()
    full = MultiHeadSelfAttention(16, 2).eval()
    full.load_state_dict(sparse.state_dict())
    x = torch.randn(2, 9, 16)
    torch.testing.assert_close(sparse(x), full(x))


def test_defaults_are_the_grid_width_and_options_are_checked():
    layer = build_attention("sparse", 16, 2, grid=(4, 6))
    assert (layer.local, layer.stride) == (6, 6)
    with pytest.raises(ValueError, match="stride"):
        SparseAttention(16, 2, stride=0)
    with pytest.raises(ValueError, match="grid"):
        build_attention("sparse", 16, 2)


@torch.no_grad()
def test_model_prefix_tokens_are_global_and_paths_agree():
    torch.manual_seed(0)
    model = VisionTransformer(
        ViTConfig(
            img_size=16,
            patch_size=4,
            embed_dim=16,
            depth=2,
            num_heads=2,
            num_classes=3,
            reg_tokens=2,
            attention="sparse",
            sparse_local=1,
            sparse_stride=4,
        )
    ).eval()
    images = torch.randn(2, 3, 16, 16)
    fast = model(images)
    _, weights = attention_weights(model, images)
    assert weights[0].shape == (2, 2, 19, 19)
    assert (weights[0][:, :, :3] > 0).all() and (weights[0][:, :, :, :3] > 0).all()  # class + 2 registers: global
    assert not weights[0][..., 3:, 3:][..., ~sparse_pattern(16, 1, 4)].any()
    for block in model.blocks:
        block.attn.fused = False
    torch.testing.assert_close(model(images), fast, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(sparse_local=-1), "sparse_local"),
        (dict(sparse_stride=0), "sparse_stride"),
    ],
)
def test_config_ranges(overrides, match):
    with pytest.raises(ValueError, match=match):
        ViTConfig(attention="sparse", **overrides)
