"""Position tables: sinusoids against the NumPy reference, rotary as a relative rotation, resampling."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import vitlab.reference as ref
from vitlab.ops.positions import apply_rotary, resample_grid, rotary_2d_angles, sincos_1d, sincos_2d

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True)  # the same examples every run
grids = st.tuples(st.integers(1, 6), st.integers(1, 6))


@SETTINGS
@given(grid=grids, quarter=st.integers(1, 6))
def test_sincos_tables_match_the_reference(grid, quarter):
    dim = 4 * quarter
    np.testing.assert_allclose(
        sincos_1d(grid[0] * grid[1], dim, dtype=torch.float64).numpy(),
        ref.sincos_1d(grid[0] * grid[1], dim),
        rtol=0,
        atol=4e-15,  # float64 sin/cos of the same angle differ by a few ulps between torch and NumPy
    )
    np.testing.assert_allclose(
        sincos_2d(grid, dim, dtype=torch.float64).numpy(), ref.sincos_2d(grid, dim), rtol=0, atol=4e-15
    )
    assert sincos_2d(grid, dim).dtype == torch.float32  # the default stays float32


def test_sincos_width_errors():
    with pytest.raises(ValueError, match="even width, got dim=7"):
        sincos_1d(4, 7)
    with pytest.raises(ValueError, match="divisible by 4, got dim=6"):
        sincos_2d((2, 2), 6)
    with pytest.raises(ValueError, match="head width divisible by 4, got 6"):
        rotary_2d_angles((2, 2), 6)


@SETTINGS
@given(grid=grids, quarter=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_rotary_is_a_rotation_that_sees_only_relative_offsets(grid, quarter, seed):
    gh, gw = grid
    d = 4 * quarter
    sin, cos = (t.double() for t in rotary_2d_angles(grid, d))  # float32 tables: tolerance 1e-6
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, d, generator=g, dtype=torch.float64)
    queries = apply_rotary(q.expand(1, 1, gh * gw, d), sin, cos)[0, 0]  # q placed at every grid cell
    keys = apply_rotary(k.expand(1, 1, gh * gw, d), sin, cos)[0, 0]
    close = dict(rtol=1e-6, atol=1e-6)  # float32: scores of magnitude ~10 round at ~1e-6
    torch.testing.assert_close(queries.norm(dim=-1), q.norm().expand(gh * gw), **close)
    scores = (queries @ keys.T).reshape(gh, gw, gh, gw)  # [r1, c1, r2, c2]
    torch.testing.assert_close(scores[1:, :, 1:, :], scores[:-1, :, :-1, :], **close)  # shift both rows
    torch.testing.assert_close(scores[:, 1:, :, 1:], scores[:, :-1, :, :-1], **close)  # shift both columns


def test_resampling_to_the_same_grid_is_the_identity_and_constants_stay_constant():
    table = torch.randn(1, 12, 8)
    assert resample_grid(table, (3, 4), (3, 4)) is table
    out = resample_grid(torch.full((1, 12, 8), 0.5), (3, 4), (5, 7))
    assert out.shape == (1, 35, 8)
    torch.testing.assert_close(out, torch.full_like(out, 0.5))
    with pytest.raises(ValueError, match="12 rows, not 2x2 = 4"):
        resample_grid(table, (2, 2), (4, 4))
