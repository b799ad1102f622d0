"""ops.windows: partition and reverse, the gather layout, the shift mask, relative positions."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vitlab.ops.windows import fit_window, relative_position_index, window_layout, window_partition, window_reverse


@settings(max_examples=25, deadline=None)
@given(nh=st.integers(1, 4), nw=st.integers(1, 4), mh=st.integers(1, 4), mw=st.integers(1, 4), c=st.integers(1, 3))
def test_partition_then_reverse_is_exact(nh, nw, mh, mw, c):
    x = torch.randn(2, nh * mh, nw * mw, c)
    windows = window_partition(x, (mh, mw))
    assert windows.shape == (2, nh * nw, mh * mw, c)
    assert torch.equal(windows[:, 0], x[:, :mh, :mw].reshape(2, -1, c))  # top-left window, raster order
    assert torch.equal(windows[:, -1], x[:, -mh:, -mw:].reshape(2, -1, c))
    assert torch.equal(window_reverse(windows, (mh, mw), (nh * mh, nw * mw)), x)


def test_partition_needs_whole_windows():
    with pytest.raises(ValueError, match="pad it to 8x8"):
        window_partition(torch.zeros(1, 7, 8, 1), (4, 4))


def test_fit_window_is_swins_rule():
    assert fit_window((56, 56), (7, 7), (3, 3)) == ((7, 7), (3, 3))
    assert fit_window((7, 7), (7, 7), (3, 3)) == ((7, 7), (0, 0))  # one window: no shift
    assert fit_window((4, 10), (7, 7), (3, 3)) == ((4, 7), (0, 3))  # per axis


@settings(max_examples=40, deadline=None)
@given(gh=st.integers(1, 9), gw=st.integers(1, 9), m=st.integers(1, 5), shifted=st.booleans())
def test_layout_puts_every_token_in_exactly_one_slot(gh, gw, m, shifted):
    window, shift = fit_window((gh, gw), (m, m), (m // 2, m // 2) if shifted else (0, 0))
    layout = window_layout((gh, gw), window, shift)
    n, flat = gh * gw, layout.index.flatten()
    assert layout.index.shape == (-(-gh // window[0]) * -(-gw // window[1]), window[0] * window[1])
    assert sorted(flat[flat < n].tolist()) == list(range(n))
    assert bool((flat <= n).all())
    assert torch.equal(flat[layout.inverse], torch.arange(n))


def allowed_pairs(grid, window, shift):
    """(window, query token, key token) for every pair the layout lets attend, real tokens only."""
    layout = window_layout(grid, window, shift)
    n = grid[0] * grid[1]
    mask = (
        torch.ones(layout.index.shape + layout.index.shape[-1:], dtype=torch.bool)
        if layout.mask is None
        else layout.mask
    )
    return [
        (w, int(a), int(b))
        for w, q, k in mask.nonzero().tolist()
        for a, b in [(layout.index[w, q], layout.index[w, k])]
        if a < n and b < n
    ]


@pytest.mark.parametrize("grid, window", [((8, 8), (4, 4)), ((10, 7), (4, 3)), ((6, 9), (3, 3)), ((5, 5), (2, 2))])
def test_shifted_windows_never_attend_across_the_wrap_around(grid, window):
    """Every pair that may attend lies within one window's reach in the original grid: the roll never
    lets a token see one from the opposite edge. And the shift does connect tokens that sat in
    different unshifted windows (otherwise it would be pointless)."""
    gw = grid[1]
    shift = (window[0] // 2, window[1] // 2)
    pairs = allowed_pairs(grid, window, shift)
    for _, a, b in pairs:
        assert abs(a // gw - b // gw) < window[0] and abs(a % gw - b % gw) < window[1], (a, b)
    unshifted_window = {t: (t // gw // window[0], t % gw // window[1]) for t in range(grid[0] * gw)}
    assert any(unshifted_window[a] != unshifted_window[b] for _, a, b in pairs)


@pytest.mark.parametrize("grid, window", [((8, 8), (4, 4)), ((7, 5), (3, 2))])
def test_unshifted_windows_pair_every_token_of_a_window(grid, window):
    gw = grid[1]
    pairs = {(a, b) for _, a, b in allowed_pairs(grid, window, (0, 0))}
    blocks = {t: (t // gw // window[0], t % gw // window[1]) for t in range(grid[0] * gw)}
    assert pairs == {(a, b) for a in blocks for b in blocks if blocks[a] == blocks[b]}


def test_padding_slots_are_keys_only_for_padding():
    layout = window_layout((5, 5), (3, 3))  # padded to 6x6
    n = 25
    pad = layout.index == n
    assert int(pad.sum()) == 36 - 25
    real_query_pad_key = layout.mask & ~pad[:, :, None] & pad[:, None, :]
    assert not real_query_pad_key.any()
    assert layout.mask.diagonal(dim1=1, dim2=2).all()  # no empty row


def test_relative_position_index_matches_timm():
    from timm.models.swin_transformer import get_relative_position_index

    for window in ((7, 7), (4, 3), (1, 5)):
        assert torch.equal(relative_position_index(window), get_relative_position_index(*window))
