"""The Swin Transformer: registered configs, stages, padding, the shared block, training."""

import pytest
import torch
import torch.nn.functional as F

from vitlab.layers import Block, PatchMerging, WindowAttention
from vitlab.models import SwinConfig, SwinTransformer, build_registered, get_config


@pytest.mark.parametrize(
    "name, grids",
    [
        ("swin-nano-patch2-window7-28", ((14, 14), (7, 7), (4, 4))),
        ("swin-nano-patch2-window4-32", ((16, 16), (8, 8), (4, 4))),
    ],
)
def test_small_configs_run_at_their_sizes(name, grids):
    model = build_registered(name).eval()
    cfg = model.config
    assert cfg.stage_grids == grids
    images = torch.randn(2, cfg.in_chans, *cfg.img_size)
    features = model.forward_features(images)
    assert features.shape == (2, *grids[-1], cfg.embed_dim * 4)
    assert model(images).shape == (2, 10)


def test_swin_tiny_config():
    cfg = get_config("swin-tiny-patch4-window7-224")
    assert cfg.stage_grids == ((56, 56), (28, 28), (14, 14), (7, 7)) and cfg.dims == (96, 192, 384, 768)


def test_stages_use_the_vit_block_with_windows_shifted_in_odd_blocks():
    model = build_registered("swin-nano-patch2-window7-28")
    assert isinstance(model.stages[1].downsample, PatchMerging)
    assert isinstance(model.stages[0].downsample, torch.nn.Identity)
    stage0 = model.stages[0].blocks
    assert all(type(b) is Block and isinstance(b.attn, WindowAttention) for b in stage0)
    assert [b.attn.shift_size for b in stage0] == [(0, 0), (3, 3)]
    assert [b.attn.window_size for b in model.stages[2].blocks] == [(4, 4), (4, 4)]  # 4x4 grid: one window
    assert [b.attn.shift_size for b in model.stages[2].blocks] == [(0, 0), (0, 0)]
    assert model.no_weight_decay() == {n for n, _ in model.named_parameters() if "relative_position_bias" in n}


def test_patch_merging_takes_swins_neighbour_order_and_pads_odd_sides():
    merge = PatchMerging(1, 4)
    x = torch.arange(9.0).reshape(1, 3, 3, 1)
    with torch.no_grad():
        merge.reduction.weight.copy_(torch.eye(4))
        merge.norm = torch.nn.Identity()
    out = merge(x)
    assert out.shape == (1, 2, 2, 4)
    assert out[0, 0, 0].tolist() == [0.0, 3.0, 1.0, 4.0]  # (0,0), (1,0), (0,1), (1,1)
    assert out[0, 1, 1].tolist() == [8.0, 0.0, 0.0, 0.0]  # the padded corner


def test_sizes_that_do_not_divide_are_padded_and_train():
    model = SwinTransformer(
        SwinConfig(
            img_size=30,
            patch_size=4,
            in_chans=3,
            num_classes=4,
            embed_dim=16,
            depths=(2, 2),
            num_heads=(2, 4),
            window_size=3,
        )
    )
    assert model.config.stage_grids == ((8, 8), (4, 4))  # 30 -> 32 pixels; 8 % 3 and 4 % 3 pad windows
    images, labels = torch.randn(4, 3, 30, 30), torch.tensor([0, 1, 2, 3])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    assert losses[-1] < losses[0]


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(depths=(2, 2), num_heads=(2,)), "one entry per stage"),
        (dict(embed_dim=18, num_heads=(4, 4, 4, 4)), "not divisible by num_heads"),
        (dict(window_size=0), "window_size must be a positive integer"),
    ],
)
def test_config_errors(overrides, match):
    with pytest.raises(ValueError, match=match):
        SwinConfig(**overrides)
