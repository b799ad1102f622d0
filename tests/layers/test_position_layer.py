"""Position modules: fixed tables are exact buffers, learned tables resample, row + column adds up."""

import numpy as np
import pytest
import torch

import vitlab.reference as ref
from vitlab.layers.position import LearnedPosition, RowColumnPosition, SinCosPosition, build_position


@pytest.mark.parametrize("two_d", [True, False])
def test_sincos_is_a_fixed_buffer_exact_in_float64(two_d):
    module = SinCosPosition((3, 4), 8, two_d=two_d)
    assert list(module.parameters()) == []
    assert "cached" in dict(module.named_buffers()) and module.state_dict() == {}  # not saved either
    expected = ref.sincos_2d((3, 4), 8) if two_d else ref.sincos_1d(12, 8)
    x = torch.zeros(1, 12, 8, dtype=torch.float64)
    np.testing.assert_allclose(module.double()(x, (3, 4))[0].numpy(), expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(
        module(x, (4, 3))[0].numpy(),  # another grid, computed
        ref.sincos_2d((4, 3), 8) if two_d else expected,
        rtol=0,
        atol=1e-15,
    )
    assert module.float().cached.dtype == torch.float32


def test_sincos_resample_replaces_the_cached_table():
    module = SinCosPosition((2, 2), 8)
    module.resample_((3, 5))
    assert module.grid == (3, 5) and module.cached.shape == (1, 15, 8)
    torch.testing.assert_close(module.cached, module.table((3, 5)))


def test_learned_table_resamples():
    module = LearnedPosition((3, 4), 8)
    before = module.weight.detach().clone()
    module.resample_((3, 4))
    assert torch.equal(module.weight, before)  # same grid: identity
    module.resample_((6, 8))
    assert module.weight.shape == (1, 48, 8) and module.weight.requires_grad


def test_row_column_positions_match_the_reference():
    module = RowColumnPosition((2, 3), 4).double()
    x = torch.randn(2, 6, 4, dtype=torch.float64)
    expected = ref.add_2d_position(x.numpy(), (2, 3), module.row.detach().numpy(), module.col.detach().numpy())
    np.testing.assert_allclose(module(x, (2, 3)).detach().numpy(), expected, atol=1e-15)
    assert sum(p.numel() for p in module.parameters()) == (2 + 3) * 4


def test_unknown_kind_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown position embedding 'alibi'.*learned, sincos1d"):
        build_position("alibi", (2, 2), 8)
