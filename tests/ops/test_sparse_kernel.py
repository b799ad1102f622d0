"""The blocked sparse kernel: its slots are the pattern (each key once), it equals the masked dense kernel in value
and gradient (with a bias, global tokens, ragged blocks), and it never forms an N x N tensor."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vitlab.engine.measure import peak_memory
from vitlab.ops.attention import (
    attention_weights,
    from_blocks,
    from_residue_classes,
    sparse_attention,
    sparse_blocks,
    sparse_layout,
    sparse_pattern,
)

SETTINGS = settings(max_examples=40, deadline=None)
patterns = st.tuples(st.integers(1, 40), st.integers(0, 12), st.integers(1, 45), st.integers(0, 3))


def slot_keys(layout, n):
    """``(N, K)``: every slot's key token of each patch query, ``-1`` for slots that do not count."""
    keys = [torch.arange(layout.global_tokens).expand(n, -1), from_blocks(layout.band_keys, n)]
    if layout.rows:
        keys.append(from_residue_classes(layout.strided_keys, n))
    return torch.cat(keys, 1)


def masked_reference(q, k, v, allowed, bias=None):
    """``softmax(q k^T / sqrt(d) + bias, -inf outside allowed) v``, dense."""
    mask = torch.zeros(allowed.shape, dtype=q.dtype).masked_fill(~allowed, float("-inf"))
    if bias is not None:
        table, index = bias
        mask = mask + table[index].permute(2, 0, 1)
    return attention_weights(q, k, mask) @ v


def problem(patches, globals_, heads=2, dim=8, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = patches + globals_
    q, k, v = (torch.randn(2, heads, t, dim, generator=g, dtype=dtype) for _ in range(3))
    table = torch.randn(7, heads, generator=g, dtype=dtype)
    index = torch.randint(0, 7, (t, t), generator=g)
    return q, k, v, (table, index)


@SETTINGS
@given(pattern=patterns)
def test_slots_hold_each_key_of_the_pattern_once(pattern):
    n, local, stride, globals_ = pattern
    layout = sparse_layout(n + globals_, local, stride, globals_)
    keys = slot_keys(layout, n)
    counts = torch.zeros(n, n + globals_ + 1, dtype=torch.long)
    counts.scatter_add_(1, keys.where(keys >= 0, n + globals_), torch.ones_like(keys))
    assert counts[:, :-1].max() <= 1  # a key both local and strided (the query itself too) counts once
    assert torch.equal(counts[:, :-1].bool(), sparse_pattern(n + globals_, local, stride, globals_)[globals_:])


@SETTINGS
@given(pattern=patterns, biased=st.booleans())
def test_kernel_equals_the_masked_dense_kernel(pattern, biased):
    n, local, stride, globals_ = pattern
    q, k, v, bias = problem(n, globals_)
    bias = bias if biased else None
    layout = sparse_layout(n + globals_, local, stride, globals_)
    expected = masked_reference(q, k, v, sparse_pattern(n + globals_, local, stride, globals_), bias)
    torch.testing.assert_close(sparse_attention(q, k, v, layout, bias), expected, atol=1e-12, rtol=0)
    if globals_:  # only the first queries: the global ones, then one patch query more
        for queries in (globals_, globals_ + 1):
            out = sparse_attention(q, k, v, layout, bias, queries=queries)
            torch.testing.assert_close(out, expected[..., :queries, :], atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "grid, local, stride, globals_",
    [
        ((8, 8), 8, 8, 0),  # blocks divide the tokens
        ((7, 9), 9, 9, 1),  # 63 tokens: a ragged last block and residue class
        ((6, 10), 4, 7, 2),
        ((5, 5), 0, 3, 0),  # no band beyond the query itself
    ],
)
def test_float32_matches_to_1e_5(grid, local, stride, globals_):
    n = grid[0] * grid[1]
    q, k, v, bias = problem(n, globals_, heads=3, dim=16, dtype=torch.float32)
    layout = sparse_layout(n + globals_, local, stride, globals_)
    for b in (None, bias):
        expected = masked_reference(q, k, v, sparse_pattern(n + globals_, local, stride, globals_), b)
        torch.testing.assert_close(sparse_attention(q, k, v, layout, b), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("globals_", [0, 2])
def test_gradients_equal_the_masked_kernels(globals_):
    n, local, stride = 30, 4, 6  # 30 tokens: blocks of 4 and classes of 5 rows, both ragged or not
    inputs = problem(n, globals_, dtype=torch.float64, seed=1)
    q, k, v, (table, index) = (t.requires_grad_() if isinstance(t, torch.Tensor) else t for t in inputs)
    table.requires_grad_()
    weights = torch.randn(2, 2, n + globals_, 8, dtype=torch.float64)
    layout = sparse_layout(n + globals_, local, stride, globals_)
    allowed = sparse_pattern(n + globals_, local, stride, globals_)
    ours = torch.autograd.grad((sparse_attention(q, k, v, layout, (table, index)) * weights).sum(), (q, k, v, table))
    reference = masked_reference(q, k, v, allowed, (table, index))
    theirs = torch.autograd.grad((reference * weights).sum(), (q, k, v, table))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)


def test_blocks_cover_the_band_and_classes_only_when_strided_keys_lie_beyond_it():
    assert sparse_blocks(64, 8, 8) == (8, 1, 8)
    assert sparse_blocks(10, 0, 3) == (1, 0, 4)  # local 0: blocks of one, no neighbours
    assert sparse_blocks(10, 20, 3) == (10, 0, 0)  # the band covers everything
    assert sparse_blocks(10, 4, 12) == (4, 1, 0)  # no multiple of the stride fits in the sequence
    assert sparse_blocks(10, 6, 3) == (6, 1, 4)  # 9 lies beyond the band


@torch.no_grad()
def test_memory_grows_like_the_pattern_not_like_n_squared():
    side = 64  # 4,096 tokens, band and stride the grid's width
    n, heads = side * side, 2
    q, k, v = (torch.randn(1, heads, n, 16) for _ in range(3))
    layout = sparse_layout(n, side, side)
    peak = peak_memory(lambda: sparse_attention(q, k, v, layout))
    dense_scores = heads * n * n * 4
    assert peak < dense_scores / 6  # scores of ~4 sqrt(N) = 256 slots a query, not 4,096
