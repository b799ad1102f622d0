"""Attention math: row-stochastic weights, outputs in the values' hull, fast == explicit, score scale."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import vitlab.reference as ref
from vitlab.ops.attention import attention_weights, merge_heads, scaled_dot_product_attention, split_heads

SETTINGS = settings(max_examples=25, deadline=None)
problems = st.tuples(
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(1, 9),
    st.integers(1, 9),
    st.integers(1, 8),
    st.integers(0, 2**16),
    st.sampled_from([0.1, 1.0, 10.0]),
)


def qkv(problem, dtype=torch.float64):
    b, h, nq, nk, d, seed, spread = problem
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, h, n, d, generator=g, dtype=dtype) for n in (nq, nk, nk))
    return q * spread, k, v


@SETTINGS
@given(problem=problems)
def test_weights_are_row_stochastic_and_output_is_their_average_of_values(problem):
    q, k, v = qkv(problem)
    out, weights = scaled_dot_product_attention(q, k, v, need_weights=True)
    assert weights.shape == q.shape[:3] + (k.shape[2],)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(q.shape[:3], dtype=q.dtype))
    torch.testing.assert_close(out, weights @ v)
    # a convex combination of the value rows lies, coordinate by coordinate, between their min and max
    assert (out >= v.amin(dim=2, keepdim=True) - 1e-12).all()
    assert (out <= v.amax(dim=2, keepdim=True) + 1e-12).all()


@SETTINGS
@given(problem=problems)
def test_fused_kernel_equals_explicit_scores(problem):
    q, k, v = qkv(problem, torch.float32)
    fast, none = scaled_dot_product_attention(q, k, v)
    explicit, _ = scaled_dot_product_attention(q, k, v, need_weights=True)
    assert none is None
    spread = problem[-1]  # float32 error in exp(score) grows with the scores' size
    torch.testing.assert_close(fast, explicit, rtol=0, atol=1e-6 * max(1.0, spread))


@SETTINGS
@given(problem=problems)
def test_weights_match_the_numpy_reference(problem):
    q, k, _ = qkv(problem)
    scores = q.numpy() @ k.numpy().swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    np.testing.assert_allclose(attention_weights(q, k).numpy(), ref.softmax(scores), atol=1e-12)


def test_masks_remove_keys():
    """Masking a key out equals deleting it, for a bool (keep) mask and an additive -inf mask."""
    q, k, v = qkv((2, 2, 4, 5, 8, 0, 1.0))
    keep = torch.tensor([[True, False, True, True, False]])  # (1, Nk) broadcasts over queries
    kept = keep[0].nonzero()[:, 0]
    weights = attention_weights(q, k, mask=keep)
    assert (weights[..., ~keep[0]] == 0).all()
    torch.testing.assert_close(weights[..., kept], attention_weights(q, k[:, :, kept]))
    additive = torch.zeros(keep.shape, dtype=q.dtype).masked_fill(~keep, float("-inf"))
    torch.testing.assert_close(attention_weights(q, k, mask=additive), weights)
    for mask in (keep, additive):
        fast, _ = scaled_dot_product_attention(q, k, v, mask=mask)
        torch.testing.assert_close(fast, scaled_dot_product_attention(q, k[:, :, kept], v[:, :, kept])[0])


@pytest.mark.parametrize("scale, variance", [(None, 1.0), (1.0, 64.0)])
def test_scaled_scores_have_unit_variance(scale, variance):
    """q.k / sqrt(d) has variance 1 for unit-variance q, k (d without the scale).

    With two independent keys per query, log(w0 / w1) = s0 - s1 has variance 2 var(s); 50,000
    samples estimate it to about 0.7% (one standard deviation), the tolerance is 5%.
    """
    n, d = 50_000, 64
    q, k = torch.randn(n, 1, 1, d, dtype=torch.float64), torch.randn(n, 1, 2, d, dtype=torch.float64)
    log_w = attention_weights(q, k, scale=scale).log()
    estimate = (log_w[..., 0] - log_w[..., 1]).var().item() / 2
    assert estimate == pytest.approx(variance, rel=0.05)


@SETTINGS
@given(b=st.integers(1, 3), n=st.integers(1, 6), heads=st.integers(1, 4), d=st.integers(1, 5))
def test_split_and_merge_heads(b, n, heads, d):
    x = torch.randn(b, n, heads * d, dtype=torch.float64)
    per_head = split_heads(x, heads)
    np.testing.assert_array_equal(per_head.numpy(), ref.split_heads(x.numpy(), heads))
    assert torch.equal(merge_heads(per_head), x)
