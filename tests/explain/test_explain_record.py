"""Recording attention leaves the fast path and the outputs alone, and records the explicit weights."""

import pytest
import torch

from vitlab.explain.record import attention_weights, record_attention
from vitlab.models import build_registered
from vitlab.models.vit import VisionTransformer
from vitlab.models.vit_config import ViTConfig

TINY = dict(img_size=8, patch_size=2, in_chans=1, num_classes=3, embed_dim=16, depth=3, num_heads=2)
VARIANTS = {
    "class token": dict(pool="token", class_token=True),
    "mean pool": dict(pool="mean", class_token=False),
    "registers + rope": dict(pool="token", class_token=True, reg_tokens=2, pos_embed="rope"),
    "lsa + qk norm": dict(pool="mean", class_token=False, attention="lsa", qk_norm=True),
    "post-norm": dict(pool="token", block="postnorm"),
}


def tiny_vit(**options) -> VisionTransformer:
    return VisionTransformer(ViTConfig(**{**TINY, **options}))


def explicit_weights(model: VisionTransformer, images: torch.Tensor) -> list[torch.Tensor]:
    """Each layer's weights by walking the blocks with forward_with_weights."""
    x, grid = model.embed(images)
    rope = model.rope(grid) if model.rope is not None else None
    weights = []
    for block in model.blocks:
        attn_input = x if model.config.block == "postnorm" else block.norm1(x)
        weights.append(block.attn.forward_with_weights(attn_input, rope)[1])
        x = block(x, rope)
    return weights


@pytest.mark.parametrize("variant", VARIANTS)
def test_recording_keeps_outputs_bitwise_and_records_explicit_weights(variant):
    model = tiny_vit(**VARIANTS[variant]).eval()
    for block in model.blocks:  # move LSA's temperature off its initial sqrt(d)
        if block.attn.temperature is not None:
            block.attn.temperature.data.fill_(0.7)
    images = torch.rand(4, 1, 8, 8)
    with torch.no_grad():
        plain = model(images)
        with record_attention(model) as recorder:
            recorded = model(images)
        expected = explicit_weights(model, images)
    assert torch.equal(plain, recorded)
    assert all(block.attn.fused for block in model.blocks)
    n = 16 + model.num_prefix_tokens
    assert len(recorder) == 3
    for got, want in zip(recorder.weights, expected):
        assert got.shape == (4, 2, n, n)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch.testing.assert_close(got.sum(-1), torch.ones(4, 2, n))
    assert recorder.stack().shape == (3, 4, 2, n, n)


def test_lsa_recording_masks_the_diagonal():
    model = tiny_vit(pool="mean", class_token=False, attention="lsa").eval()
    _, weights = attention_weights(model, torch.rand(2, 1, 8, 8))
    assert all(torch.all(w.diagonal(dim1=-2, dim2=-1) == 0) for w in weights)


def test_hooks_are_removed_even_after_an_error():
    model = tiny_vit()
    with pytest.raises(RuntimeError):
        with record_attention(model):
            raise RuntimeError("boom")
    with record_attention(model):
        model(torch.rand(1, 1, 8, 8))
    assert all(not block.attn._forward_hooks for block in model.blocks)


def test_training_mode_draws_the_same_random_numbers():
    model = tiny_vit(drop_rate=0.3, attn_drop_rate=0.3).train()
    images = torch.rand(3, 1, 8, 8)
    torch.manual_seed(1)
    plain, after_plain = model(images), torch.rand(5)
    torch.manual_seed(1)
    with record_attention(model):
        recorded = model(images)
    assert torch.equal(plain, recorded)
    assert torch.equal(after_plain, torch.rand(5))


def test_weights_before_a_forward_pass_and_models_without_attention_are_errors():
    with record_attention(tiny_vit()) as recorder:
        with pytest.raises(ValueError, match="run the model forward"):
            recorder.weights
    with pytest.raises(ValueError, match="gradient and occlusion"):
        with record_attention(build_registered("cnn-digits")):
            pass
