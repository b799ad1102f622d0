"""timm VisionTransformer -> vitlab -> timm: same logits, every supported option."""

import pytest
import torch

timm = pytest.importorskip("timm")
from timm.layers import resample_abs_pos_embed  # noqa: E402
from timm.models.vision_transformer import VisionTransformer as TimmViT  # noqa: E402

from vitlab.interop import from_timm, timm_kwargs, to_timm_state_dict  # noqa: E402
from vitlab.models import build_registered, get_config  # noqa: E402

SMALL = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=5)
VARIANTS = {
    "mean-pool-no-class-token": dict(class_token=False, global_pool="avg"),
    "registers-no-embed-class": dict(reg_tokens=4, no_embed_class=True, global_pool="avg"),
    "registers-embed-class": dict(reg_tokens=2),
    "in-chans-1": dict(in_chans=1),
    "qk-norm-layer-scale-no-qkv-bias": dict(qk_norm=True, init_values=1e-5, qkv_bias=False),
    "pre-norm-max-pool": dict(pre_norm=True, global_pool="max"),
    "mean-pool-norm-every-token": dict(global_pool="avg", fc_norm=False),
    "class-token-no-embed-class": dict(no_embed_class=True),
    "no-final-norm": dict(final_norm=False),
    "no-positions": dict(pos_embed="none"),
}


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


@torch.no_grad()
def test_vit_tiny_patch16_224(perturb):
    source = perturb(timm.create_model("vit_tiny_patch16_224", pretrained=False).eval())
    model = from_timm(source)
    images = torch.randn(2, 3, 224, 224)
    assert max_diff(model(images), source(images)) <= 1e-5
    assert model.config == get_config("vit-tiny-patch16-224", fc_norm=False)
    assert torch.equal(model.class_token, source.cls_token + source.pos_embed[:, :1])
    assert torch.equal(model.pos_embed.weight, source.pos_embed[:, 1:])


@torch.no_grad()
@pytest.mark.parametrize("options", VARIANTS.values(), ids=VARIANTS.keys())
def test_variant_and_round_trip(options, perturb):
    source = perturb(TimmViT(**SMALL, **options).eval())
    model = from_timm(source)
    images = torch.randn(2, source.patch_embed.proj.in_channels, 32, 32)
    expected = source(images)
    assert max_diff(model(images), expected) <= 1e-5

    back = TimmViT(**timm_kwargs(model.config, no_embed_class=source.no_embed_class)).eval()
    back.load_state_dict(to_timm_state_dict(model, no_embed_class=source.no_embed_class), strict=True)
    assert max_diff(back(images), expected) <= 1e-5


@torch.no_grad()
@pytest.mark.parametrize(
    "options",
    [{}, VARIANTS["mean-pool-no-class-token"], VARIANTS["registers-embed-class"]],
    ids=["class-token", "mean-pool", "registers"],
)
def test_other_image_size_resamples_positions(options, perturb):
    """from_timm(img_size=48) equals timm at 48 with its own resampling of the 32-pixel table."""
    source = perturb(TimmViT(**SMALL, **options).eval())
    state = source.state_dict()
    state["pos_embed"] = resample_abs_pos_embed(
        state["pos_embed"], (6, 6), (4, 4), num_prefix_tokens=source.num_prefix_tokens
    )
    bigger = TimmViT(**{**SMALL, **options, "img_size": 48}).eval()
    bigger.load_state_dict(state)
    model = from_timm(source, img_size=48)
    images = torch.randn(2, 3, 48, 48)
    assert max_diff(model(images), bigger(images)) <= 1e-5


@torch.no_grad()
def test_dynamic_image_size(perturb):
    source = perturb(TimmViT(**SMALL, reg_tokens=1, dynamic_img_size=True).eval())
    model = from_timm(source)
    images = torch.randn(2, 3, 48, 40)
    assert max_diff(model(images), source(images)) <= 1e-5


@pytest.mark.parametrize(
    "options, named",
    [
        (dict(global_pool="map"), "global_pool='map'"),
        (dict(global_pool="avgmax"), "global_pool='avgmax'"),
        (dict(act_layer="gelu_tanh"), "exact GELU"),
        (dict(norm_layer="rmsnorm"), "RmsNorm"),
        (dict(proj_bias=False), "proj_bias=False"),
    ],
)
def test_unsupported_options_are_named(options, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(")):
        from_timm(TimmViT(**SMALL, **options))


def test_to_timm_refuses_what_timm_cannot_hold():
    with pytest.raises(ValueError, match="sincos2d"):
        to_timm_state_dict(build_registered("vit-seed-sincos"))
