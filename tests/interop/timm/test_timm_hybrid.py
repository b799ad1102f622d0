"""timm hybrid ViTs (HybridEmbed: a ResNetV2 stem, or a conv stack) -> vitlab conv stems: same logits."""

from functools import partial

import pytest
import torch
from torch import nn

timm = pytest.importorskip("timm")
from timm.layers import HybridEmbed  # noqa: E402
from timm.models.vision_transformer import VisionTransformer as TimmViT  # noqa: E402

from vitlab.interop import from_timm  # noqa: E402

SMALL = dict(embed_dim=32, depth=2, num_heads=2, num_classes=5)


def with_statistics(module: nn.Module) -> nn.Module:
    """BatchNorm running statistics away from their init (0 mean, unit variance), which would hide a wrong map."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2.0)
    return module


def conv_stack(widths: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for c_in, c_out in zip([3, *widths], widths):
        layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]
    return nn.Sequential(*layers)


@torch.no_grad()
@pytest.mark.parametrize("img_size", [64, (32, 64)])
def test_resnet_stem_hybrid(img_size, perturb):
    source = perturb(timm.create_model("vit_tiny_r_s16_p8_224", pretrained=False, img_size=img_size, **SMALL).eval())
    model = from_timm(source)
    assert (model.config.patch_embed, model.config.patch_size) == ("resnet_stem", 32)
    images = torch.randn(2, 3, *((img_size,) * 2 if isinstance(img_size, int) else img_size))
    assert (model(images) - source(images)).abs().max() <= 1e-5


@torch.no_grad()
@pytest.mark.parametrize("widths, patch, side", [([8, 16, 32], 1, 32), ([16, 32], 3, 48)])
def test_conv_stem_hybrid(widths, patch, side, perturb):
    source = TimmViT(
        img_size=side, patch_size=patch, embed_layer=partial(HybridEmbed, backbone=conv_stack(widths)), **SMALL
    ).eval()
    source = with_statistics(perturb(source))
    model = from_timm(source)
    assert (model.config.patch_embed, model.config.patch_size) == ("conv_stem", 2 ** len(widths) * patch)
    images = torch.randn(2, 3, side, side)
    assert (model(images) - source(images)).abs().max() <= 1e-5


@pytest.mark.parametrize(
    "backbone, patch",
    [
        (nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU()), 1),  # no BatchNorm
        (conv_stack([16, 32]), 2),  # vitlab's conv stem of patch 8 has three stride-2 convolutions, not two
    ],
)
def test_other_backbones_are_named(backbone, patch):
    with pytest.raises(ValueError, match="HybridEmbed backbone"):
        from_timm(TimmViT(img_size=32, patch_size=patch, embed_layer=partial(HybridEmbed, backbone=backbone), **SMALL))
