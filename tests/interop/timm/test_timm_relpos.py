"""timm VisionTransformerRelPos (relative position bias) -> vitlab: same logits."""

import pytest
import torch

timm = pytest.importorskip("timm")
from timm.models.vision_transformer_relpos import VisionTransformerRelPos  # noqa: E402

from vitlab.interop import from_timm, to_timm_state_dict  # noqa: E402

SMALL = dict(img_size=(32, 48), patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=5, rel_pos_type="bias")
VARIANTS = {
    "per-block-avg": {},
    "shared": dict(shared_rel_pos=True),
    "class-token": dict(class_token=True, global_pool="token"),
    "class-token-shared-fc-norm": dict(class_token=True, fc_norm=True, shared_rel_pos=True),
    "qk-norm-no-layer-scale": dict(qk_norm=True, init_values=None),
}


@torch.no_grad()
@pytest.mark.parametrize("options", VARIANTS.values(), ids=VARIANTS.keys())
def test_logits_equal_timms(options, perturb):
    source = perturb(VisionTransformerRelPos(**SMALL, **options).eval())
    model = from_timm(source)
    assert model.config.rel_pos == ("shared" if options.get("shared_rel_pos") else "per_block")
    images = torch.randn(2, 3, 32, 48)
    expected = source(images)
    assert (model(images) - expected).abs().max() <= 1e-5
    for table in (p for n, p in source.named_parameters() if n.endswith("relative_position_bias_table")):
        table.zero_()  # the bias is doing work: without it timm's logits move
    assert (source(images) - expected).abs().max() > 1e-4


@torch.no_grad()
def test_vit_relpos_small_with_bias(perturb):
    source = perturb(
        timm.create_model("vit_relpos_small_patch16_224", pretrained=False, rel_pos_type="bias", depth=2).eval()
    )
    images = torch.randn(1, 3, 224, 224)
    assert (from_timm(source)(images) - source(images)).abs().max() <= 1e-5


@pytest.mark.parametrize(
    "options, named",
    [
        (dict(rel_pos_type="mlp"), "RelPosMlp"),
        (dict(global_pool=""), "global_pool"),
    ],
)
def test_unsupported_options_are_named(options, named):
    with pytest.raises(ValueError, match=named):
        from_timm(VisionTransformerRelPos(**{**SMALL, **options}))


def test_img_size_and_export_to_plain_timm_are_refused():
    source = VisionTransformerRelPos(**SMALL)
    with pytest.raises(ValueError, match="img_size"):
        from_timm(source, img_size=64)
    with pytest.raises(ValueError, match="rel_pos"):
        to_timm_state_dict(from_timm(source))
