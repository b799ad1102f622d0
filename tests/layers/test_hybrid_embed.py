"""Hybrid stems: token grid H/P, widths, "same" padding, parameter estimate, refusals (timm oracles: tests/interop)."""

import pytest
import torch
import torch.nn.functional as F

from vitlab.errors import ConfigError
from vitlab.layers import ConvStem, HybridEmbedding
from vitlab.layers.conv_stem import same_padding, standardize_weight
from vitlab.layers.hybrid_embed import conv_stem_convs
from vitlab.models import VisionTransformer, ViTConfig


@pytest.mark.parametrize(
    "stem, patch, size",
    [
        ("conv_stem", 16, 64),
        ("conv_stem", 4, 28),
        ("conv_stem", 6, 24),
        ("resnet_stem", 8, 32),
        ("resnet_stem", 16, (48, 32)),
    ],
)
def test_token_grid_is_image_over_patch(stem, patch, size):
    h, w = (size, size) if isinstance(size, int) else size
    embed = HybridEmbedding(stem, patch, 3, 32)
    tokens = embed(torch.randn(2, 3, h, w))
    assert tokens.shape == (2, (h // patch) * (w // patch), 32)
    assert embed.grid_size(h, w) == (h // patch, w // patch)


def test_conv_stem_is_xiao_et_al():
    stem = ConvStem(3, 192, conv_stem_convs(16))
    assert [layer.conv.out_channels for layer in stem.layers] == [24, 48, 96, 192]
    assert all(layer.conv.stride == (2, 2) and layer.conv.kernel_size == (3, 3) for layer in stem.layers)
    assert conv_stem_convs(6) == 1 and conv_stem_convs(64) == 4


@pytest.mark.parametrize("size, kernel, stride", [(224, 7, 2), (64, 7, 2), (112, 3, 2), (7, 3, 2), (9, 3, 1)])
def test_same_padding_keeps_ceil_size_over_stride(size, kernel, stride):
    before, after = same_padding(size, kernel, stride)
    assert after - before in (0, 1)
    out = F.max_pool2d(torch.zeros(1, 1, size + before + after, 1), (kernel, 1), (stride, 1))
    assert out.shape[2] == -(-size // stride)


def test_weight_standardisation_gives_zero_mean_unit_variance_filters():
    w = standardize_weight(torch.randn(4, 3, 7, 7) * 5 + 2, eps=1e-8).flatten(1)
    torch.testing.assert_close(w.mean(1), torch.zeros(4), atol=1e-6, rtol=0)
    torch.testing.assert_close(w.var(1, unbiased=False), torch.ones(4))


@pytest.mark.parametrize("stem", ["conv_stem", "resnet_stem"])
def test_model_trains_and_estimate_is_close(stem):
    config = ViTConfig(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2, num_classes=3, patch_embed=stem)
    model = VisionTransformer(config)
    count = sum(p.numel() for p in model.parameters())
    assert abs(config.approx_params - count) <= 0.02 * count
    model(torch.randn(2, 3, 32, 32)).sum().backward()
    assert all(p.grad is not None for p in model.patch_embed.parameters())


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(patch_embed="conv_stem", patch_size=7, img_size=28), "multiple of 2"),
        (dict(patch_embed="resnet_stem", patch_size=6, img_size=24), "multiple of 4"),
        (dict(patch_embed="conv_stem", patch_size=8, img_size=30, pad=True), "pad"),
    ],
)
def test_patch_sizes_a_stem_cannot_reach_are_refused(overrides, match):
    with pytest.raises(ConfigError, match=match):
        ViTConfig(**overrides)
