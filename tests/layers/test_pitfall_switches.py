"""The textbook's pitfalls as switches, each against a reference written out by hand: a BatchNorm block,
a causal mask on the scores, and an overlapping (strided) tokenizer."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vitlab.errors import ConfigError
from vitlab.layers.attention import MultiHeadSelfAttention
from vitlab.layers.block import Block, PostNormBlock
from vitlab.layers.norm import TokenBatchNorm, build_norm
from vitlab.layers.patch_embed import PatchEmbedding
from vitlab.ops.patches import overlapping_patches, patchify, strided_grid

SETTINGS = settings(max_examples=15, deadline=None)


# -- BatchNorm in the block ------------------------------------------------------------------------


def batch_norm_by_hand(x, weight, bias, eps, mean=None, var=None):
    """Per feature over every token of every image: (x - mean) / sqrt(var + eps) * weight + bias."""
    if mean is None:
        flat = x.reshape(-1, x.shape[-1])
        mean, var = flat.mean(0), flat.var(0, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def test_token_batch_norm_normalises_each_feature_over_batch_and_tokens():
    torch.manual_seed(0)
    norm = TokenBatchNorm(6, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    x = 3 * torch.randn(4, 5, 6) + 2
    out = norm(x)
    torch.testing.assert_close(out, batch_norm_by_hand(x, norm.weight, norm.bias, 1e-6), rtol=0, atol=1e-5)
    # the running statistics moved by momentum 0.1 towards the batch's (unbiased variance), and evaluation uses them
    flat = x.reshape(-1, 6)
    torch.testing.assert_close(norm.running_mean, 0.1 * flat.mean(0))
    torch.testing.assert_close(norm.running_var, 0.9 + 0.1 * flat.var(0, unbiased=True))
    norm.eval()
    expected = batch_norm_by_hand(x, norm.weight, norm.bias, 1e-6, norm.running_mean, norm.running_var)
    torch.testing.assert_close(norm(x), expected, rtol=0, atol=1e-5)


def test_an_images_output_depends_on_its_batch_under_batch_norm_only():
    torch.manual_seed(0)
    x, others = torch.randn(1, 4, 8), torch.randn(3, 4, 8)
    for kind, shared in (("layernorm", False), ("batchnorm", True)):
        norm = build_norm(kind, 8)
        alone, together = norm(x), norm(torch.cat([x, others]))[:1]
        assert (not torch.allclose(alone, together, atol=1e-4)) == shared


@pytest.mark.parametrize("block_class", [Block, PostNormBlock])
def test_a_batch_norm_block_equals_the_block_written_by_hand(block_class):
    torch.manual_seed(0)
    block = block_class(8, 2, mlp_ratio=2.0, norm="batchnorm")
    for norm in (block.norm1, block.norm2):
        assert isinstance(norm, TokenBatchNorm)
        with torch.no_grad():
            norm.weight.normal_()
            norm.bias.normal_()
    x = torch.randn(3, 5, 8)
    with torch.no_grad():
        got = block(x)

        def bn(t, norm):
            return batch_norm_by_hand(t, norm.weight, norm.bias, 1e-6)

        if block_class is Block:  # x + attn(BN(x)); then + mlp(BN(.))
            h = x + block.attn(bn(x, block.norm1))
            expected = h + block.mlp(bn(h, block.norm2))
        else:  # BN(x + attn(x)); then BN(. + mlp(.))
            h = bn(x + block.attn(x), block.norm1)
            expected = bn(h + block.mlp(h), block.norm2)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_unknown_block_norm_is_refused():
    with pytest.raises(ValueError, match="layernorm"):
        build_norm("groupnorm", 8)


# -- the causal mask -------------------------------------------------------------------------------


@SETTINGS
@given(heads=st.integers(1, 3), n=st.integers(1, 9), fused=st.booleans())
def test_causal_attention_equals_masking_the_score_matrix_by_hand(heads, n, fused):
    torch.manual_seed(n)
    dim = 4 * heads
    attn = MultiHeadSelfAttention(dim, heads, causal=True, fused=fused).eval()
    x = torch.randn(2, n, dim)
    with torch.no_grad():
        out = attn(x)
        explicit, weights = attn.forward_with_weights(x)
        q, k, v = attn.qkv(x).reshape(2, n, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(dim // heads)
        future = torch.arange(n)[None, :] > torch.arange(n)[:, None]  # key after query
        expected_weights = scores.masked_fill(future, float("-inf")).softmax(-1)
        expected = attn.proj((expected_weights @ v).transpose(1, 2).reshape(2, n, dim))
    torch.testing.assert_close(weights, expected_weights, rtol=0, atol=1e-6)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(explicit, expected, rtol=0, atol=1e-5)
    assert float(weights[..., future].abs().max()) == 0 if n > 1 else True
    # the first token reads itself alone
    torch.testing.assert_close(weights[..., 0, 0], torch.ones(2, heads))


def test_causal_is_refused_with_locality_self_attention():
    with pytest.raises(ConfigError, match="causal"):
        MultiHeadSelfAttention(8, 2, kind="lsa", causal=True)


# -- the overlapping tokenizer ---------------------------------------------------------------------


def windows_by_loop(images, patch, stride):
    """The textbook's strided convolution loop: every P x P window every S pixels, flattened row, column,
    channel, in raster order."""
    b, c, h, w = images.shape
    rows, cols = (h - patch) // stride + 1, (w - patch) // stride + 1
    out = [
        images[:, :, r * stride : r * stride + patch, q * stride : q * stride + patch]
        .permute(0, 2, 3, 1)
        .reshape(b, -1)
        for r in range(rows)
        for q in range(cols)
    ]
    return torch.stack(out, 1)


@SETTINGS
@given(
    patch=st.integers(1, 6),
    stride=st.integers(1, 6),
    extra=st.tuples(st.integers(0, 7), st.integers(0, 7)),
    chans=st.integers(1, 3),
)
def test_strided_windows_count_floor_h_minus_p_over_s_plus_one_and_match_a_strided_conv(patch, stride, extra, chans):
    h, w = patch + extra[0], patch + extra[1]
    if stride == patch:  # tiling: the embedding refuses a patch that does not divide the image
        h, w = h - (h % patch), w - (w % patch)
    images = torch.randn(2, chans, h, w)
    grid = strided_grid(h, w, patch, stride)
    assert grid == ((h - patch) // stride + 1, (w - patch) // stride + 1)
    tokens = overlapping_patches(images, patch, stride)
    torch.testing.assert_close(tokens, windows_by_loop(images, patch, stride), rtol=0, atol=0)
    embed = PatchEmbedding(patch, chans, 5, stride=stride)
    linear = PatchEmbedding(patch, chans, 5, method="linear", stride=stride)
    linear.load_state_dict(embed.state_dict())
    conv = torch.nn.Conv2d(chans, 5, patch, stride=stride)  # an independent strided convolution
    conv.load_state_dict(embed.proj.state_dict())
    with torch.no_grad():
        expected = conv(images).flatten(2).transpose(1, 2)
        assert expected.shape[1] == grid[0] * grid[1] == embed.grid_size(h, w)[0] * embed.grid_size(h, w)[1]
        torch.testing.assert_close(embed(images), expected, rtol=0, atol=1e-5)
        torch.testing.assert_close(linear(images), expected, rtol=0, atol=1e-5)


def test_overlap_is_the_miscount_the_texts_warn_of():
    # 28x28 in 7x7 windows every 4 pixels: 6 x 6 = 36 tokens, not 28*28/49 = 16
    assert strided_grid(28, 28, 7, 4) == (6, 6)
    assert strided_grid(28, 28, 7, 7) == (4, 4) and 28 * 28 // 49 == 16
    images = torch.randn(1, 1, 28, 28)
    torch.testing.assert_close(overlapping_patches(images, 7, 7), patchify(images, 7))  # stride P tiles


def test_a_window_larger_than_the_image_is_refused():
    with pytest.raises(ConfigError, match="smaller than one"):
        strided_grid(5, 8, 6, 2)
    with pytest.raises(ValueError, match="pad=True"):
        PatchEmbedding(4, 1, 8, pad=True, stride=2)
    with pytest.raises(ConfigError):
        overlapping_patches(torch.randn(1, 1, 3, 3), 4, 1)
