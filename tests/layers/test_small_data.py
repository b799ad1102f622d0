"""Small-data ViT parts (Lee, Lee & Song 2021): Shifted Patch Tokenization and Locality Self-Attention.

Oracles: explicit pixel loops for the shifts, the NumPy reference for patchify / LayerNorm / softmax.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import vitlab.reference as ref
from vitlab.layers.attention import MultiHeadSelfAttention
from vitlab.layers.position import Rotary2d
from vitlab.layers.shifted_patch import ShiftedPatchTokenization, diagonal_shifts
from vitlab.models import VisionTransformer, ViTConfig, build_registered, get_config

SETTINGS = settings(max_examples=15, deadline=None)
# (row, column) offsets of the five channel blocks: block k holds x(i - a_k, j - b_k).
OFFSETS = [(0, 0), (1, 1), (1, -1), (-1, 1), (-1, -1)]


def shifts_by_loops(images: np.ndarray, s: int) -> np.ndarray:
    """``(B, C, H, W) -> (B, 5C, H, W)`` one pixel at a time, zeros outside the image."""
    b, c, h, w = images.shape
    out = np.zeros((b, 5 * c, h, w), images.dtype)
    for k, (a, bb) in enumerate(OFFSETS):
        for i in range(h):
            for j in range(w):
                si, sj = i - a * s, j - bb * s
                if 0 <= si < h and 0 <= sj < w:
                    out[:, k * c : (k + 1) * c, i, j] = images[:, :, si, sj]
    return out


# -- Shifted Patch Tokenization ------------------------------------------------------------------


def test_one_pixel_moves_half_a_patch_along_each_diagonal():
    image = torch.zeros(1, 1, 14, 14)
    image[0, 0, 6, 5] = 1.0
    shifted = diagonal_shifts(image, 3)
    where = [tuple(torch.nonzero(shifted[0, k]).flatten().tolist()) for k in range(5)]
    #          itself   down-right  down-left  up-right  up-left
    assert where == [(6, 5), (9, 8), (9, 2), (3, 8), (3, 2)]


def test_shifts_fill_with_zeros_where_the_image_ends():
    image = torch.ones(1, 1, 7, 7)
    shifted = diagonal_shifts(image, 3)
    assert shifted[0, 0].sum() == 49
    for k in range(1, 5):
        assert shifted[0, k].sum() == 4 * 4  # a 4x4 corner survives each shift
    assert shifted[0, 1, :3].sum() == 0 and shifted[0, 1, :, :3].sum() == 0


@SETTINGS
@given(chans=st.integers(1, 3), h=st.integers(2, 9), w=st.integers(2, 9), shift=st.integers(1, 3))
def test_shifts_match_the_pixel_loop(chans, h, w, shift):
    images = torch.randn(2, chans, h, w)
    np.testing.assert_array_equal(diagonal_shifts(images, shift).numpy(), shifts_by_loops(images.numpy(), shift))


@SETTINGS
@given(
    patch=st.integers(2, 5),
    chans=st.integers(1, 3),
    grid=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    dim=st.sampled_from([4, 8]),
)
def test_spt_is_layernorm_then_linear_on_patchified_shifts(patch, chans, grid, dim):
    spt = ShiftedPatchTokenization(patch, chans, dim).double()
    for p in spt.parameters():
        torch.nn.init.normal_(p)
    images = torch.randn(2, chans, grid[0] * patch, grid[1] * patch, dtype=torch.float64)
    with torch.no_grad():
        tokens = spt(images)
    shifted = shifts_by_loops(images.numpy(), patch // 2).transpose(0, 2, 3, 1)  # NHWC
    normed = ref.layer_norm(
        ref.patchify(shifted, patch), spt.norm.weight.detach().numpy(), spt.norm.bias.detach().numpy()
    )
    expected = normed @ spt.proj.weight.detach().numpy().T + spt.proj.bias.detach().numpy()
    assert tokens.shape == (2, grid[0] * grid[1], dim)
    np.testing.assert_allclose(tokens.numpy(), expected, atol=1e-10)


def test_spt_shapes_and_parameter_count():
    spt = ShiftedPatchTokenization(7, 1, 64)
    assert spt(torch.randn(3, 1, 28, 28)).shape == (3, 16, 64)
    assert sum(p.numel() for p in spt.parameters()) == 2 * 245 + 245 * 64 + 64 == 16_234
    padded = ShiftedPatchTokenization(4, 3, 8, pad=True)
    assert padded(torch.randn(1, 3, 10, 9)).shape == (1, 9, 8) and padded.grid_size(10, 9) == (3, 3)


def test_spt_errors_name_the_way_out():
    with pytest.raises(ValueError, match="in_chans=3"):
        ShiftedPatchTokenization(7, 1, 8)(torch.randn(1, 3, 28, 28))
    with pytest.raises(ValueError, match="not divisible by patch 7"):
        ShiftedPatchTokenization(7, 1, 8)(torch.randn(1, 1, 30, 28))
    with pytest.raises(ValueError, match="leave it None"):
        ShiftedPatchTokenization(4, 1, 8, shift=4)


# -- Locality Self-Attention ---------------------------------------------------------------------


def lsa_by_hand(attn: MultiHeadSelfAttention, x: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The paper's formula in NumPy from the layer's q, k, v: softmax(mask(q k^T) / tau) v, then proj."""
    q, k, v = (t.detach().numpy() for t in attn.qkv_heads(x))
    scores = q @ k.transpose(0, 1, 3, 2) / attn.temperature.item()
    n = scores.shape[-1]
    scores[..., np.arange(n), np.arange(n)] = -np.inf
    weights = ref.softmax(scores)
    out = ref.combine_heads(weights @ v) @ attn.proj.weight.detach().numpy().T + attn.proj.bias.detach().numpy()
    return out, weights


def test_lsa_temperature_starts_at_sqrt_d_and_is_one_parameter():
    full, lsa = MultiHeadSelfAttention(64, 4), MultiHeadSelfAttention(64, 4, kind="lsa")
    assert lsa.temperature.item() == pytest.approx(4.0)
    assert sum(p.numel() for p in lsa.parameters()) - sum(p.numel() for p in full.parameters()) == 1
    assert set(lsa.state_dict()) - set(full.state_dict()) == {"temperature"}


def test_lsa_matches_the_formula_rows_sum_to_one_and_the_diagonal_is_zero():
    attn = MultiHeadSelfAttention(12, 3, kind="lsa").double().eval()
    for p in attn.parameters():
        torch.nn.init.normal_(p)
    x = torch.randn(2, 6, 12, dtype=torch.float64)
    with torch.no_grad():
        out, weights = attn.forward_with_weights(x)
    expected_out, expected_weights = lsa_by_hand(attn, x)
    np.testing.assert_allclose(weights.numpy(), expected_weights, atol=1e-12)
    np.testing.assert_allclose(out.numpy(), expected_out, atol=1e-12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 6, dtype=torch.float64))
    assert torch.all(weights.diagonal(dim1=-2, dim2=-1) == 0)
    assert torch.all(weights + torch.eye(6, dtype=torch.float64) > 0)  # every other token keeps some weight


@SETTINGS
@given(
    heads=st.integers(1, 3),
    quarter=st.integers(1, 3),
    grid=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    prefix=st.integers(0, 2),
    rope=st.booleans(),
    qk_norm=st.booleans(),
)
def test_lsa_fast_path_equals_explicit_path(heads, quarter, grid, prefix, rope, qk_norm):
    n = prefix + grid[0] * grid[1]
    if n < 2:
        return
    dim = heads * 4 * quarter
    attn = MultiHeadSelfAttention(dim, heads, qk_norm=qk_norm, kind="lsa").eval()
    with torch.no_grad():
        attn.temperature.fill_(0.5 + torch.rand(()).item() * 5)  # not only the initial sqrt(d)
    rotary = Rotary2d(grid, dim // heads, num_prefix=prefix)(grid) if rope else None
    x = torch.randn(2, n, dim)
    with torch.no_grad():
        fast = attn(x, rotary)
        explicit, weights = attn.forward_with_weights(x, rotary)
    assert torch.all(weights.diagonal(dim1=-2, dim2=-1) == 0)
    torch.testing.assert_close(fast, explicit, rtol=0, atol=1e-6)


def test_lsa_temperature_learns_by_both_paths():
    x = torch.randn(2, 5, 8)
    grads = []
    for fused in (True, False):
        torch.manual_seed(1)
        attn = MultiHeadSelfAttention(8, 2, kind="lsa", fused=fused)
        grads.append(torch.autograd.grad(attn(x).square().sum(), attn.temperature)[0])
    assert grads[0] != 0
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=1e-5)


def test_lsa_errors_name_the_way_out():
    with pytest.raises(ValueError, match="'full', 'lsa'"):
        MultiHeadSelfAttention(8, 2, kind="local")
    with pytest.raises(ValueError, match="at least 2 tokens.*attention='full'"):
        MultiHeadSelfAttention(8, 2, kind="lsa")(torch.randn(1, 1, 8))


# -- the model -----------------------------------------------------------------------------------


def test_default_configs_are_unchanged_by_the_new_options():
    seed = build_registered("vit-seed")
    assert get_config("vit-seed").attention == "full" and get_config("vit-seed").patch_embed == "conv"
    assert sum(p.numel() for p in seed.parameters()) == 71_946
    assert seed.state_dict()["patch_embed.proj.weight"].shape == (64, 1, 7, 7)
    assert not any("temperature" in key for key in seed.state_dict())


def test_small_data_model_fits_the_budget_and_trains():
    model = build_registered("vit-seed-small-data")
    cfg = model.config
    assert cfg.patch_embed == "spt" and cfg.attention == "lsa"
    assert isinstance(model.patch_embed, ShiftedPatchTokenization)
    assert sum(p.numel() for p in model.parameters()) <= 71_946
    images = torch.randn(4, 1, 28, 28)
    logits = model(images)
    assert logits.shape == (4, 10)
    logits.logsumexp(-1).sum().backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
    assert all(block.attn.temperature.grad != 0 for block in model.blocks)
    assert model.patch_embed.norm.weight.grad.abs().sum() > 0


def test_both_options_on_any_vit_and_config_round_trip():
    cfg = ViTConfig(
        img_size=16,
        patch_size=4,
        in_chans=3,
        num_classes=5,
        embed_dim=32,
        depth=1,
        num_heads=2,
        patch_embed="spt",
        attention="lsa",
    )
    assert ViTConfig.from_dict(cfg.to_dict()) == cfg
    model = VisionTransformer(cfg).eval()
    assert model(torch.randn(2, 3, 16, 16)).shape == (2, 5)
    tokens, weights = model.blocks[0].attn.forward_with_weights(model.embed(torch.randn(1, 3, 16, 16))[0])
    assert weights.shape == (1, 2, 17, 17) and torch.all(weights.diagonal(dim1=-2, dim2=-1) == 0)


@pytest.mark.parametrize("field, value", [("patch_embed", "shifted"), ("attention", "local")])
def test_config_rejects_unknown_names(field, value):
    with pytest.raises(ValueError, match=f"{field} must be one of"):
        ViTConfig(**{field: value})


def test_temperature_is_not_weight_decayed():
    from vitlab.engine import param_groups

    model = build_registered("vit-seed-small-data")
    decayed = {id(p) for p in param_groups(model, 0.05)[0]["params"]}
    assert not any(id(block.attn.temperature) in decayed for block in model.blocks)
