"""WindowAttention against a dense oracle built from first principles; one window is full attention;
windowed ViTs."""

import math

import pytest
import torch

from vitlab.explain.record import attention_weights
from vitlab.layers import MultiHeadSelfAttention, WindowAttention
from vitlab.models import VisionTransformer, ViTConfig
from vitlab.ops.attention import merge_heads


def dense_oracle(attn: WindowAttention, x: torch.Tensor, grid: tuple[int, int]):
    """Full attention over all N tokens with a dense mask and bias, no windows gathered: token
    ``(r, c)`` sits at ``((r - sh) mod gh, (c - sw) mod gw)`` after the roll; two tokens may attend
    iff they share a window there and lie on the same side of the wrap on both axes."""
    gh, gw = grid
    (mh, mw), (sh, sw) = attn.window_size, attn.shift_size
    sh, sw = (0 if gh <= mh else sh), (0 if gw <= mw else sw)
    r, c = torch.arange(gh).repeat_interleave(gw), torch.arange(gw).repeat(gh)
    pr, pc = (r - sh) % gh, (c - sw) % gw
    same_window = (pr[:, None] // mh == pr[None] // mh) & (pc[:, None] // mw == pc[None] // mw)
    same_side = ((r[:, None] < sh) == (r[None] < sh)) & ((c[:, None] < sw) == (c[None] < sw))
    allowed = same_window & same_side
    offset = (pr[:, None] - pr[None] + mh - 1) * (2 * mw - 1) + (pc[:, None] - pc[None] + mw - 1)
    bias = attn.relative_position_bias_table[offset.where(allowed, 0)].permute(2, 0, 1)  # (H, N, N)
    q, k, v = attn.qkv_heads(x)
    scores = q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim) + bias
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
    return attn.proj(merge_heads(weights @ v)), weights


CASES = [
    ((4, 4), 4, False),
    ((8, 8), 4, True),
    ((6, 10), (4, 3), True),
    ((5, 7), 3, True),
    ((3, 5), 4, True),
    ((5, 7), 3, False),
]


@pytest.mark.parametrize("grid, window, shift", CASES)
def test_window_attention_equals_the_dense_oracle(grid, window, shift):
    attn = WindowAttention(16, 2, grid=grid, window_size=window, shift=shift).eval()
    torch.nn.init.normal_(attn.relative_position_bias_table)  # make the bias matter
    x = torch.randn(2, grid[0] * grid[1], 16)
    with torch.no_grad():
        expected, expected_weights = dense_oracle(attn, x, grid)
        out, weights = attn.forward_with_weights(x)
        torch.testing.assert_close(attn(x), expected, atol=1e-5, rtol=1e-5)  # fused path
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)  # explicit path
        torch.testing.assert_close(weights, expected_weights, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, grid[0] * grid[1]))


def test_one_window_over_the_grid_is_full_attention():
    window = WindowAttention(24, 3, grid=(4, 5), window_size=7).eval()  # shrinks to 4x5
    torch.nn.init.zeros_(window.relative_position_bias_table)
    full = MultiHeadSelfAttention(24, 3).eval()
    full.load_state_dict(window.state_dict(), strict=False)
    x = torch.randn(3, 20, 24)
    with torch.no_grad():
        torch.testing.assert_close(window(x), full(x), atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(
            window.forward_with_weights(x)[1], full.forward_with_weights(x)[1], atol=1e-6, rtol=1e-5
        )


def test_gradients_are_finite_through_shift_and_padding_masks():
    attn = WindowAttention(16, 2, grid=(5, 7), window_size=3, shift=True)
    x = torch.randn(2, 35, 16, requires_grad=True)
    attn(x).square().sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(attn.relative_position_bias_table.grad).all()


def test_wrong_token_count_names_the_grid():
    attn = WindowAttention(16, 2, grid=(4, 4), window_size=2)
    with pytest.raises(ValueError, match="17 tokens for a 4x4 grid"):
        attn(torch.randn(1, 17, 16))


def window_vit(**overrides) -> VisionTransformer:
    config = dict(
        img_size=(20, 28),
        patch_size=4,
        in_chans=1,
        num_classes=3,
        embed_dim=16,
        depth=2,
        num_heads=2,
        class_token=False,
        pool="mean",
        attention="window",
        window_size=3,
    )
    return VisionTransformer(ViTConfig(**{**config, **overrides}))


def test_windowed_vit_shifts_odd_blocks_and_keeps_full_keys_unchanged():
    model = window_vit()  # grid 5x7, padded windows
    assert [b.attn.shift_size for b in model.blocks] == [(0, 0), (1, 1)]
    full = VisionTransformer(ViTConfig(**{**model.config.to_dict(), "attention": "full"}))
    assert set(full.state_dict()) == {k for k in model.state_dict() if "relative_position" not in k}
    assert {k.split("attn.")[1] for k in full.state_dict() if k.startswith("blocks.0.attn.")} == {
        "qkv.weight",
        "qkv.bias",
        "proj.weight",
        "proj.bias",
    }


def test_windowed_vit_with_one_window_equals_the_full_vit():
    model = window_vit(window_size=8).eval()  # 5x7 grid: one window
    for block in model.blocks:
        torch.nn.init.zeros_(block.attn.relative_position_bias_table)
    full = VisionTransformer(ViTConfig(**{**model.config.to_dict(), "attention": "full"})).eval()
    full.load_state_dict(model.state_dict(), strict=False)
    images = torch.randn(2, 1, 20, 28)
    with torch.no_grad():
        torch.testing.assert_close(model(images), full(images), atol=1e-5, rtol=1e-5)


def test_windowed_vit_trains_records_and_runs_at_other_sizes():
    model = window_vit(dynamic_img_size=True, pos_embed="sincos2d")
    loss = torch.nn.functional.cross_entropy(model(torch.randn(2, 1, 20, 28)), torch.tensor([0, 2]))
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    logits, weights = attention_weights(model.eval(), torch.randn(1, 1, 20, 28))
    assert [tuple(w.shape) for w in weights] == [(1, 2, 35, 35)] * 2
    first_window = {r * 7 + c for r in range(3) for c in range(3)}  # 3x3 window of a 5x7 grid
    assert set(weights[0][0, 0, 0].nonzero().flatten().tolist()) == first_window
    assert model(torch.randn(1, 1, 32, 16)).shape == (1, 3)  # an 8x4 grid


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(class_token=True, pool="token"), "class_token=False"),
        (dict(window_size=0), "window_size must be a positive integer"),
    ],
)
def test_windowed_vit_config_errors(overrides, match):
    with pytest.raises(ValueError, match=match):
        window_vit(**overrides)
