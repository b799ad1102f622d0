"""A timm ViT's weights as the CLIP image tower: the tower's features equal timm's."""

import pytest
import torch

from vitlab.errors import CheckpointError
from vitlab.interop import timm_kwargs, write_state_dict
from vitlab.models import CLIPModel, ViTConfig, build_registered
from vitlab.tasks.clip import load_image_tower

timm = pytest.importorskip("timm")


def clip_with(vision: ViTConfig, embed_dim: int = 24) -> CLIPModel:
    model = build_registered(
        "clip-shapes", vision=vision.to_dict(), text_width=32, text_depth=1, text_heads=2, embed_dim=embed_dim
    )
    assert isinstance(model, CLIPModel)
    return model.eval()


@pytest.mark.parametrize("pool", ["token", "mean"])
def test_a_timm_vit_state_dict_gives_timms_features(pool):
    vision = ViTConfig(
        img_size=32,
        patch_size=8,
        num_classes=0,
        embed_dim=48,
        depth=2,
        num_heads=3,
        pool=pool,
        class_token=pool == "token",
    )
    torch.manual_seed(0)
    reference = timm.models.vision_transformer.VisionTransformer(**timm_kwargs(vision)).eval()
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(torch.randn_like(p) * 0.02)  # class token, positions and norms away from their init
    model = clip_with(vision)
    assert load_image_tower(model, reference.state_dict()) == ["visual_projection.weight"]
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        expected = reference.forward_head(reference.forward_features(images), pre_logits=True)
        torch.testing.assert_close(model.image_features(images), expected, rtol=1e-5, atol=1e-5)


def test_an_open_clip_style_tower_brings_its_projection(tmp_path):
    vision = ViTConfig(
        img_size=32, patch_size=8, num_classes=0, embed_dim=48, depth=1, num_heads=3, pre_norm=True, fc_norm=False
    )
    kwargs = {**timm_kwargs(vision), "num_classes": 24}
    torch.manual_seed(1)
    reference = timm.models.vision_transformer.VisionTransformer(**kwargs).eval()
    with torch.no_grad():
        reference.head.bias.zero_()  # timm's CLIP towers: CLIP's projection as a bias-free head
    write_state_dict({f"visual.trunk.{k}": v for k, v in reference.state_dict().items()}, tmp_path / "tower.pth")
    model = clip_with(vision, embed_dim=24)
    assert load_image_tower(model, tmp_path / "tower.pth") == []
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(
            model.visual_projection(model.image_features(images)), reference(images), rtol=1e-5, atol=1e-5
        )


def test_a_tower_of_another_shape_is_refused_naming_the_keys():
    vision = ViTConfig(img_size=32, patch_size=8, num_classes=0, embed_dim=48, depth=2, num_heads=3)
    reference = timm.models.vision_transformer.VisionTransformer(**{**timm_kwargs(vision), "depth": 1})
    with pytest.raises(CheckpointError, match="missing keys.*blocks.1"):
        load_image_tower(clip_with(vision), reference.state_dict())
