"""MultiHeadSelfAttention: fast path == explicit path (with rotary too), and the fused qkv layout."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import vitlab.reference as ref
from vitlab.layers.attention import MultiHeadSelfAttention
from vitlab.layers.position import Rotary2d

SETTINGS = settings(max_examples=15, deadline=None)


@SETTINGS
@given(
    heads=st.integers(1, 3),
    quarter=st.integers(1, 3),
    grid=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    prefix=st.integers(0, 2),
    rope=st.booleans(),
    qk_norm=st.booleans(),
    qkv_bias=st.booleans(),
)
def test_fast_path_equals_explicit_path(heads, quarter, grid, prefix, rope, qk_norm, qkv_bias):
    dim = heads * 4 * quarter
    attn = MultiHeadSelfAttention(dim, heads, qkv_bias=qkv_bias, qk_norm=qk_norm).eval()
    n = prefix + grid[0] * grid[1]
    rotary = Rotary2d(grid, dim // heads, num_prefix=prefix)(grid) if rope else None
    x = torch.randn(2, n, dim)
    with torch.no_grad():
        fast = attn(x, rotary)
        explicit, weights = attn.forward_with_weights(x, rotary)
    assert weights.shape == (2, heads, n, n)
    torch.testing.assert_close(fast, explicit, rtol=0, atol=1e-6)


def test_matches_the_reference_with_fused_qkv_split_in_order():
    dim, heads = 12, 3
    attn = MultiHeadSelfAttention(dim, heads).double().eval()
    for p in attn.parameters():
        torch.nn.init.normal_(p)
    x = torch.randn(2, 5, dim, dtype=torch.float64)
    w = attn.qkv.weight.detach().numpy()
    b = attn.qkv.bias.detach().numpy()
    out, weights = ref.multihead_self_attention(
        x.numpy(),
        w[:dim].T,
        w[dim : 2 * dim].T,
        w[2 * dim :].T,
        attn.proj.weight.detach().numpy().T,
        heads,
        b[:dim],
        b[dim : 2 * dim],
        b[2 * dim :],
        attn.proj.bias.detach().numpy(),
    )
    with torch.no_grad():
        got, got_weights = attn.forward_with_weights(x)
    np.testing.assert_allclose(got.numpy(), out, atol=1e-12)
    np.testing.assert_allclose(got_weights.numpy(), weights, atol=1e-12)


def test_rotation_leaves_prefix_tokens_unchanged():
    attn = MultiHeadSelfAttention(16, 2)
    rope = Rotary2d((3, 2), head_dim=8, num_prefix=2)((3, 2))  # 2 prefix + 6 patch tokens
    x = torch.randn(1, 8, 16)
    (q, k, _), (q0, k0, _) = attn.qkv_heads(x, rope), attn.qkv_heads(x)
    assert torch.equal(q[:, :, :2], q0[:, :, :2]) and torch.equal(k[:, :, :2], k0[:, :, :2])
    assert not torch.allclose(q[:, :, 3:], q0[:, :, 3:])  # patches past (0, 0) do rotate


def test_heads_must_divide_the_width():
    with pytest.raises(ValueError, match=r"embed dim 10 is not divisible by num_heads 3.*1, 2, 5, 10"):
        MultiHeadSelfAttention(10, 3)
