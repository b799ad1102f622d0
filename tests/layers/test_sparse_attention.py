"""Sparse attention: the pattern against a loop, fast paths (blocked and masked) = explicit path = a NumPy
reference, in value and gradient, global tokens, the relative position bias."""

import numpy as np
import pytest
import torch
from torch import nn

import vitlab.layers.sparse_attention as sparse_module
from vitlab.errors import ConfigError
from vitlab.explain import attention_weights
from vitlab.layers import MultiHeadSelfAttention, RelativePositionBias, SparseAttention, build_attention
from vitlab.models import VisionTransformer, ViTConfig
from vitlab.ops.attention import sparse_pattern

PATTERNS = [(20, 2, 5, 0), (20, 0, 4, 3), (17, 3, 100, 1), (9, 1, 1, 2), (30, 7, 6, 0)]


@pytest.fixture(params=["blocked", "masked"])
def fast_path(request, monkeypatch):
    """The fast path under test: the blocked kernel at any size, or the masked one (its choice below
    ``BLOCKED_FROM`` tokens)."""
    monkeypatch.setattr(sparse_module, "BLOCKED_FROM", 0 if request.param == "blocked" else 10**9)
    return request.param


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
def test_fast_and_explicit_paths_equal_a_numpy_reference(tokens, local, stride, globals_, fast_path):
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


def test_the_pattern_and_layout_are_built_once_per_token_count():
    layer = SparseAttention(8, 2, grid=(3, 3), local=1, stride=3)
    cpu = torch.device("cpu")
    first, layout = layer.allowed(9, cpu), layer.layout(9, cpu)
    assert layer.allowed(9, cpu) is first and layer.layout(9, cpu) is layout
    assert layer.allowed(10, cpu).shape == (10, 10) and layer.layout(10, cpu).band_keys.shape == (10, 1, 3)


def test_the_blocked_kernel_is_the_fast_path_from_blocked_from_tokens():
    torch.manual_seed(0)
    grid = (23, 23)  # 529 patches and a class token: past BLOCKED_FROM, so forward runs the blocked kernel
    assert grid[0] * grid[1] + 1 >= sparse_module.BLOCKED_FROM
    layer = SparseAttention(16, 2, grid=grid, global_tokens=1).eval()
    x = torch.randn(2, grid[0] * grid[1] + 1, 16)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), layer.forward_with_weights(x)[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("globals_", [0, 2])
def test_gradients_of_the_blocked_path_equal_the_explicit_paths(globals_, fast_path):
    torch.manual_seed(0)
    grid = (5, 7)  # 35 patches: blocks of 3 and classes of 9 rows are both ragged
    bias = RelativePositionBias(grid, 2, globals_)
    nn.init.normal_(bias.relative_position_bias_table)
    layer = SparseAttention(16, 2, grid=grid, local=3, stride=4, global_tokens=globals_, rel_pos=bias).double()
    x = torch.randn(2, 35 + globals_, 16, dtype=torch.float64, requires_grad=True)
    target = torch.randn(2, 35 + globals_, 16, dtype=torch.float64)
    params = [x, *layer.parameters()]
    fast = torch.autograd.grad((layer(x) * target).sum(), params)
    explicit = torch.autograd.grad((layer.forward_with_weights(x)[0] * target).sum(), params)
    for a, b in zip(fast, explicit):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)


def test_the_blocked_kernel_reads_only_a_relative_position_table(monkeypatch):
    monkeypatch.setattr(sparse_module, "BLOCKED_FROM", 0)

    class Bias(nn.Module):
        def forward(self) -> torch.Tensor:
            return torch.zeros(1, 2, 9, 9)

    layer = SparseAttention(8, 2, grid=(3, 3), local=1, stride=3, rel_pos=Bias())
    with pytest.raises(ConfigError, match="RelativePositionBias"):
        layer(torch.randn(1, 9, 8))


@torch.no_grad()
def test_a_pattern_covering_every_pair_is_full_attention(fast_path):
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
def test_model_prefix_tokens_are_global_and_paths_agree(fast_path):
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
