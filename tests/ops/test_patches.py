"""patchify / unpatchify / num_tokens: exact round trips, the textbook's worked answers, clear errors."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import vitlab.reference as ref
from vitlab.ops.attention import attention_weights
from vitlab.ops.patches import num_tokens, pad_to_multiple, patchify, unpatchify

SETTINGS = settings(max_examples=25, deadline=None)
shapes = st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))


@SETTINGS
@given(shape=shapes, seed=st.integers(0, 2**16))
def test_round_trip_is_exact_and_matches_the_reference(shape, seed):
    b, c, gh, gw, p = shape
    nhwc = np.random.default_rng(seed).normal(size=(b, gh * p, gw * p, c))
    nchw = torch.from_numpy(nhwc).permute(0, 3, 1, 2)
    tokens_np, tokens_t = patchify(nhwc, p), patchify(nchw, p)
    assert tokens_np.shape == tokens_t.shape == (b, gh * gw, p * p * c)
    np.testing.assert_array_equal(tokens_np, ref.patchify(nhwc, p))
    np.testing.assert_array_equal(tokens_t.numpy(), tokens_np)  # both layouts give the same tokens
    np.testing.assert_array_equal(unpatchify(tokens_np, p, (gh, gw)), nhwc)
    assert torch.equal(unpatchify(tokens_t, p, (gh, gw)), nchw)


@SETTINGS
@given(shape=shapes)
def test_token_holds_its_patch(shape):
    """Token r*gw+c, entry (i*P+j)*C+k is pixel (r*P+i, c*P+j), channel k (an index-by-index oracle)."""
    b, ch, gh, gw, p = shape
    images = torch.arange(b * ch * gh * p * gw * p).reshape(b, ch, gh * p, gw * p)
    tokens = patchify(images, p)
    r, c, i, j, k = gh - 1, gw // 2, p - 1, 0, ch - 1
    assert tokens[-1, r * gw + c, (i * p + j) * ch + k] == images[-1, k, r * p + i, c * p + j]


def test_textbook_patch_order():
    """Exercise 31.2: a 4x4 image holding 0..15 cut into 2x2 patches."""
    image = np.arange(16).reshape(1, 4, 4, 1)
    expected = [[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]
    np.testing.assert_array_equal(patchify(image, 2)[0], expected)
    np.testing.assert_array_equal(patchify(torch.from_numpy(image).permute(0, 3, 1, 2), 2)[0].numpy(), expected)


@pytest.mark.parametrize("size, tokens", [(224, 196), (448, 784), (384, 576)])
def test_textbook_token_counts(size, tokens):
    assert num_tokens(size, size, 16) == ref.sequence_length(size, size, 16) == tokens
    assert num_tokens(size, size, 16, class_token=True) == ref.sequence_length(size, size, 16, True) == tokens + 1


def test_attention_scores_for_224_with_class_token():
    """197 tokens -> one 197 x 197 = 38,809-entry weight matrix per head."""
    n = num_tokens(224, 224, 16, class_token=True)
    q = torch.randn(1, 1, n, 4)
    assert attention_weights(q, q).numel() == 38_809


def test_textbook_patch_widths():
    """32x32 RGB with P=8 -> 16 patches of 192 numbers; a 16x16x3 patch is 768 numbers."""
    assert patchify(torch.rand(1, 3, 32, 32), 8).shape == (1, 16, 192)
    assert patchify(np.random.rand(1, 32, 32, 3), 8).shape == (1, 16, 192)
    assert patchify(torch.rand(1, 3, 224, 224), 16).shape == (1, 196, 768)


@SETTINGS
@given(h=st.integers(1, 40), w=st.integers(1, 40), p=st.integers(1, 9))
def test_padding_rounds_up(h, w, p):
    images = torch.ones(1, 2, h, w)
    tokens = patchify(images, p, pad=True)
    assert tokens.shape[1] == num_tokens(h, w, p, pad=True) == -(-h // p) * -(-w // p)
    assert tokens.sum() == images.sum()  # padding adds zeros only
    assert pad_to_multiple(images, p).shape[-2:] == (-(-h // p) * p, -(-w // p) * p)


def test_non_divisible_image_names_sizes_and_ways_out():
    with pytest.raises(ValueError) as info:
        patchify(torch.rand(1, 3, 30, 20), 7)
    message = str(info.value)
    for part in ("30x20", "patch 7", "crop", "pad=True", "35x21", "choose a patch", "2, 5, 10"):
        assert part in message
    with pytest.raises(ValueError, match="30x20"):
        num_tokens(30, 20, 7)


def test_bad_shapes_are_explained():
    with pytest.raises(ValueError, match=r"images\[None\]"):
        patchify(torch.rand(3, 8, 8), 4)
    tokens = torch.rand(1, 4, 12)
    with pytest.raises(ValueError, match="3x3 grid"):
        unpatchify(tokens, 2, 3)
    with pytest.raises(ValueError, match="not a multiple of P\\*P = 16"):
        unpatchify(tokens, 4, 2)
