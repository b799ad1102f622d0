"""Stochastic depth equals timm's ``drop_path`` bit for bit: the per-sample mask is scaled, then multiplies."""

import pytest
import torch
from timm.layers import drop_path as timm_drop_path

from vitlab.layers.drop import DropPath, drop_path


@pytest.mark.parametrize("prob", [0.1, 0.5, 1.0])
def test_drop_path_is_timms(prob):
    x = torch.randn(64, 5, 8)
    torch.manual_seed(3)
    ours = drop_path(x, prob, training=True)
    torch.manual_seed(3)
    theirs = timm_drop_path(x, prob, training=True)
    assert torch.equal(ours, theirs)
    kept = ours.flatten(1).ne(0).any(1)
    if prob < 1.0:
        torch.testing.assert_close(ours[kept], x[kept] / (1 - prob), rtol=1e-6, atol=0)
    else:
        assert not kept.any() and not ours.isnan().any()


def test_drop_path_is_the_identity_in_eval_or_at_zero():
    x = torch.randn(4, 3)
    assert drop_path(x, 0.5, training=False) is x and drop_path(x, 0.0, training=True) is x
    assert DropPath(0.5).eval()(x) is x
