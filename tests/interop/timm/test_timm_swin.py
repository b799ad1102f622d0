"""timm's SwinTransformer -> vitlab: logits within 1e-5 (random init), names, refusals."""

import pytest
import torch
from timm.models.swin_transformer import SwinTransformer as TimmSwin

from vitlab.interop import from_timm, from_timm_swin, timm_swin_config, timm_swin_to_vitlab
from vitlab.models import SwinTransformer, build_registered

TINY = dict(
    img_size=32,
    patch_size=2,
    in_chans=3,
    num_classes=10,
    embed_dim=16,
    depths=(2, 2, 2),
    num_heads=(2, 4, 8),
    window_size=4,
)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        dict(img_size=28, in_chans=1, window_size=7, num_heads=(2, 2, 4)),
        dict(num_classes=0, qkv_bias=False, mlp_ratio=2.0),
    ],
)
def test_logits_match_timm(overrides, perturb):
    timm_model = perturb(TimmSwin(**{**TINY, **overrides})).eval()
    model = from_timm(timm_model)
    assert isinstance(model, SwinTransformer) and not model.training
    images = torch.randn(2, timm_model.in_chans, *timm_model.patch_embed.img_size)
    with torch.no_grad():
        expected = timm_model(images)
        assert (model(images) - expected).abs().max() <= 1e-5


def test_names_map_onto_vitlab_and_keep_train_mode():
    timm_model = TimmSwin(**TINY).train()
    assert from_timm_swin(timm_model).training
    assert set(timm_swin_to_vitlab(timm_model.state_dict())) == set(
        build_registered("swin-nano-patch2-window4-32", embed_dim=16).state_dict()
    )


def test_config_is_read_from_the_module():
    known = timm_swin_config(TimmSwin(**{**TINY, "mlp_ratio": 3.0}))
    assert known == dict(
        img_size=(32, 32),
        patch_size=2,
        in_chans=3,
        num_classes=10,
        embed_dim=16,
        depths=(2, 2, 2),
        num_heads=(2, 4, 8),
        window_size=4,
        mlp_ratio=3.0,
        qkv_bias=True,
        norm_eps=1e-5,
    )


def test_grids_the_window_does_not_divide_are_refused():
    with pytest.raises(ValueError, match="not a multiple of its 4x4 windows"):
        from_timm(TimmSwin(**{**TINY, "img_size": 40}))  # 20x20 -> 10x10 stage
    with pytest.raises(ValueError, match="img_size applies to ViTs"):
        from_timm(TimmSwin(**TINY), img_size=64)
