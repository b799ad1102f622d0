"""Patch embedding: the convolution, the linear map on patches and the textbook's naive loop agree."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import vitlab.reference as ref
from vitlab.layers.patch_embed import PatchEmbedding, conv_weight_to_linear, linear_weight_to_conv

SETTINGS = settings(max_examples=20, deadline=None)
configs = st.tuples(
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 5),
    st.integers(1, 8),
    st.booleans(),
)


def pair(config):
    """The same module twice, once per method, sharing parameters."""
    b, c, gh, gw, p, dim, pad = config
    conv = PatchEmbedding(p, c, dim, method="conv", pad=pad)
    linear = PatchEmbedding(p, c, dim, method="linear", pad=pad)
    linear.load_state_dict(conv.state_dict())
    return conv, linear


@SETTINGS
@given(config=configs, trim=st.integers(0, 4))
def test_conv_and_linear_paths_agree(config, trim):
    b, c, gh, gw, p, dim, pad = config
    conv, linear = pair(config)
    h, w = gh * p - (trim % p if pad else 0), gw * p  # with pad=True the height needs padding
    images = torch.randn(b, c, h, w)
    out = conv(images)
    assert out.shape == (b, gh * gw, dim)
    torch.testing.assert_close(linear(images), out, rtol=0, atol=1e-6)


@SETTINGS
@given(config=configs)
def test_conv_equals_the_naive_strided_convolution(config):
    b, c, gh, gw, p, dim, _ = config
    embed = PatchEmbedding(p, c, dim).double()
    images = torch.randn(b, c, gh * p, gw * p, dtype=torch.float64)
    kernel = embed.proj.weight.detach().permute(2, 3, 1, 0).numpy()  # (D, C, P, P) -> (P, P, C, D)
    expected = ref.conv2d_strided(images.permute(0, 2, 3, 1).numpy(), kernel, embed.proj.bias.detach().numpy(), p)
    np.testing.assert_allclose(embed(images).detach().numpy(), expected.reshape(b, gh * gw, dim), atol=1e-12)


@SETTINGS
@given(dim=st.integers(1, 6), c=st.integers(1, 4), p=st.integers(1, 5))
def test_weight_layouts_round_trip(dim, c, p):
    conv_weight = torch.randn(dim, c, p, p)
    linear = conv_weight_to_linear(conv_weight)
    assert linear.shape == (dim, p * p * c)
    assert torch.equal(linear_weight_to_conv(linear, p, c), conv_weight)
    assert torch.equal(conv_weight_to_linear(linear_weight_to_conv(linear, p, c)), linear)
    # column (i*P + j)*C + k of the linear weight is kernel entry (k, i, j)
    i, j, k = p - 1, 0, c - 1
    assert torch.equal(linear[:, (i * p + j) * c + k], conv_weight[:, k, i, j])


def test_bad_inputs_name_the_way_out():
    embed = PatchEmbedding(4, in_chans=3, embed_dim=8)
    with pytest.raises(ValueError, match=r"expected images \(B, 3, H, W\), got shape \(2, 1, 8, 8\).*in_chans=1"):
        embed(torch.rand(2, 1, 8, 8))
    with pytest.raises(ValueError, match="add a batch axis"):
        embed(torch.rand(3, 8, 8))
    with pytest.raises(ValueError, match="10x8 is not divisible by patch 4"):
        embed(torch.rand(1, 3, 10, 8))
    with pytest.raises(ValueError, match="method must be 'conv' or 'linear'"):
        PatchEmbedding(4, method="unfold")
    with pytest.raises(ValueError, match="P\\*P\\*C = 4\\*4\\*3 = 48"):
        linear_weight_to_conv(torch.rand(8, 32), 4, 3)
