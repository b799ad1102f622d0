"""VisionTransformer against the NumPy reference (float64), its symmetries, and its errors."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import vitlab.reference as ref
from vitlab import ViTConfig, create_model, patchify, unpatchify

CONFIGS = {
    "seed": ("vit-seed", {}),                                    # learned, mean pool, norm on every token
    "class-token": ("vit-seed", dict(class_token=True, pool="token")),
    "rowcol": ("vit-seed", dict(pos_embed="rowcol", class_token=True, pool="token", img_size=(28, 14))),
    "sincos2d": ("vit-seed", dict(pos_embed="sincos2d", img_size=(14, 28))),
    "sincos1d-fc-norm": ("vit-seed", dict(pos_embed="sincos1d", fc_norm=None)),
    "registers": ("vit-seed", dict(class_token=True, reg_tokens=2, pool="mean", fc_norm=True, depth=3)),
    "max-no-qkv-bias": ("vit-digits", dict(pos_embed="none", pool="max", qkv_bias=False, in_chans=3)),
    "features-only": ("vit-seed", dict(depth=1, final_norm=False, num_classes=0, patch_embed="linear")),
}


def build(name, overrides):
    """A float64 model in eval mode with every parameter random, so no bias or norm hides a layout error."""
    model = create_model(name, **overrides).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(std=0.3)
    return model


def reference_params(model):
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    return ref.params_from_state_dict(state, model.config.to_dict())


def images_for(model, batch=2):
    return torch.randn(batch, model.config.in_chans, *model.config.img_size, dtype=torch.float64)


def nhwc(images):
    return images.permute(0, 2, 3, 1).numpy()


@pytest.mark.parametrize("key", CONFIGS)
def test_logits_and_tokens_match_the_reference(key):
    model = build(*CONFIGS[key])
    images = images_for(model)
    params = reference_params(model)
    logits, _ = ref.vit_forward(nhwc(images), params)
    tokens, _ = ref.encode(nhwc(images), params)
    with torch.no_grad():
        np.testing.assert_allclose(model(images).numpy(), logits, rtol=0, atol=1e-8)
        np.testing.assert_allclose(model.forward_features(images).numpy(), tokens, rtol=0, atol=1e-8)


@pytest.mark.parametrize("key", ["class-token", "registers"])
def test_attention_weights_match_the_reference(key):
    model = build(*CONFIGS[key])
    images = images_for(model)
    _, expected = ref.vit_forward(nhwc(images), reference_params(model))
    with torch.no_grad():
        x, _ = model.embed(images)
        for block, weights in zip(model.blocks, expected, strict=True):
            _, got = block.attn.forward_with_weights(block.norm1(x))
            np.testing.assert_allclose(got.numpy(), weights, rtol=0, atol=1e-10)
            x = block(x)


def test_textbook_exercise_31_4():
    """An 8x8 batch with 2x2 patches: 17 tokens with a class token, 16 with mean pooling, same logits shape."""
    images = torch.rand(3, 1, 8, 8, dtype=torch.float64)
    shapes = {}
    for class_token, pool in ((True, "token"), (False, "mean")):
        model = build("vit-digits", dict(class_token=class_token, pool=pool, depth=1))
        tokens, _ = ref.encode(nhwc(images), reference_params(model))
        with torch.no_grad():
            features, logits = model.forward_features(images), model(images)
        assert features.shape[1] == tokens.shape[1] == ref.sequence_length(8, 8, 2, class_token)
        shapes[pool] = (features.shape[1], logits.shape)
    assert shapes == {"token": (17, (3, 10)), "mean": (16, (3, 10))}


# ---- symmetries ------------------------------------------------------------------------------------

N = 16          # vit-digits: 8x8 images, 2x2 patches


@settings(max_examples=10, deadline=None)
@given(perm=st.permutations(range(N)))
def test_blocks_are_permutation_equivariant(perm):
    model = build("vit-digits", dict(pos_embed="none", depth=2))
    z = torch.randn(2, N, model.embed_dim, dtype=torch.float64)

    def encoder(x):
        for block in model.blocks:
            x = block(x)
        return model.norm(x)

    with torch.no_grad():
        torch.testing.assert_close(encoder(z[:, perm]), encoder(z)[:, perm], rtol=0, atol=1e-10)


@settings(max_examples=10, deadline=None)
@given(perm=st.permutations(range(N)), class_token=st.booleans())
def test_without_positions_shuffling_patches_shuffles_the_output(perm, class_token):
    model = build("vit-digits", dict(pos_embed="none", class_token=class_token, pool="mean", depth=2))
    images = images_for(model)
    shuffled = unpatchify(patchify(images, 2)[:, perm], 2, (4, 4))
    r = int(class_token)
    with torch.no_grad():
        out, out_shuffled = model.forward_features(images), model.forward_features(shuffled)
        torch.testing.assert_close(out_shuffled[:, r:], out[:, r:][:, perm], rtol=0, atol=1e-10)
        torch.testing.assert_close(out_shuffled[:, :r], out[:, :r], rtol=0, atol=1e-10)
        torch.testing.assert_close(model(shuffled), model(images), rtol=0, atol=1e-10)   # mean pool: invariant


@pytest.mark.parametrize("pos_embed", ["learned", "sincos2d", "sincos1d", "rowcol"])
def test_with_positions_shuffling_patches_does_not_shuffle_the_output(pos_embed):
    model = build("vit-digits", dict(pos_embed=pos_embed, depth=2))
    images = images_for(model)
    perm = list(reversed(range(N)))
    shuffled = unpatchify(patchify(images, 2)[:, perm], 2, (4, 4))
    with torch.no_grad():
        gap = (model.forward_features(shuffled) - model.forward_features(images)[:, perm]).abs().max()
    assert gap > 1e-2


# ---- image size and positions ----------------------------------------------------------------------

def test_learned_positions_resample_to_a_new_image_size():
    model = build("vit-seed", {})
    images = images_for(model)
    with torch.no_grad():
        before, table = model(images), model.pos_embed.weight.clone()
        model.set_image_size(28)                                            # same grid: the identity
        assert torch.equal(model.pos_embed.weight, table)
        torch.testing.assert_close(model(images), before, rtol=0, atol=0)
        model.set_image_size((42, 35))
        assert model.pos_embed.weight.shape == (1, 6 * 5, 64)
        assert model(torch.randn(2, 1, 42, 35, dtype=torch.float64)).shape == (2, 10)
    with pytest.raises(ValueError, match="differs from the model's img_size 42x35"):
        model(images)


def test_sincos_model_at_a_new_image_size_matches_the_reference():
    model = build("vit-seed", dict(pos_embed="sincos2d"))
    assert not [n for n, _ in model.named_parameters() if n.startswith("pos_embed")]     # a fixed buffer
    model.set_image_size((21, 35))
    images = images_for(model)
    logits, _ = ref.vit_forward(nhwc(images), reference_params(model))
    with torch.no_grad():
        np.testing.assert_allclose(model(images).numpy(), logits, rtol=0, atol=1e-8)


def test_dynamic_image_size_runs_other_sizes():
    model = build("vit-seed", dict(dynamic_img_size=True, pos_embed="sincos2d"))
    images = torch.randn(1, 1, 14, 35, dtype=torch.float64)
    logits, _ = ref.vit_forward(nhwc(images), reference_params(model))
    with torch.no_grad():
        np.testing.assert_allclose(model(images).numpy(), logits, rtol=0, atol=1e-8)
    with pytest.raises(ValueError, match="14x30 is not divisible by patch 7"):
        model(torch.randn(1, 1, 14, 30, dtype=torch.float64))


def test_rope_model_with_class_token_runs_and_both_attention_paths_agree():
    model = create_model("vit-digits", pos_embed="rope", class_token=True, pool="token", reg_tokens=1).eval()
    images = torch.randn(2, 1, 8, 8)
    with torch.no_grad():
        fast = model(images)
        for block in model.blocks:
            block.attn.fused = False
        explicit = model(images)
    assert fast.shape == (2, 10) and torch.isfinite(fast).all()
    torch.testing.assert_close(fast, explicit, rtol=0, atol=1e-6)


# ---- errors ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides", [
    dict(class_token=True, pool="token"),
    dict(class_token=True, pool="token", attention="lsa", reg_tokens=2),
    dict(class_token=True, pool="token", attention="linear"),
    dict(class_token=True, pool="token", attention="lowrank", lowrank_k=5),
    dict(class_token=True, pool="token", attention="latent", num_latents=3),
    dict(class_token=True, pool="token", block="postnorm", qk_norm=True),
    dict(class_token=True, pool="token", pos_embed="rope"),
])
def test_class_token_readout_gives_the_full_encoders_logits(overrides):
    # forward() runs the last block for the class token only; the logits must not notice
    model = build("vit-seed", overrides)
    images = images_for(model)
    with torch.no_grad():
        full = model.forward_head(model.forward_features(images))
        readout = model.forward_features(images, readout=1)
        logits = model(images)
    assert readout.shape == (2, 1, model.config.embed_dim)
    torch.testing.assert_close(logits, full, rtol=0, atol=1e-12)
    assert model.forward_features(images).shape[1] == model.num_prefix_tokens + 16


def test_wrong_image_size_names_the_ways_out():
    model = create_model("vit-seed")
    with pytest.raises(ValueError) as info:
        model(torch.randn(1, 1, 56, 56))
    for part in ("56x56", "28x28", "resize", "img_size=(56, 56)", "set_image_size", "dynamic_img_size=True"):
        assert part in str(info.value)


def test_wrong_channel_count():
    with pytest.raises(ValueError, match=r"\(B, 1, H, W\).*in_chans=3"):
        create_model("vit-seed")(torch.randn(1, 3, 28, 28))


def test_token_pool_needs_a_class_token():
    with pytest.raises(ValueError, match="class_token=False: set class_token=True or pool='mean'"):
        create_model("vit-seed", pool="token")
    with pytest.raises(ValueError, match="'token' needs a class token"):
        create_model("vit-seed").reset_classifier(5, pool="token")


def test_heads_must_divide_embed_dim():
    with pytest.raises(ValueError, match="embed_dim 64 is not divisible by num_heads 5"):
        ViTConfig(embed_dim=64, num_heads=5)


@pytest.mark.parametrize("overrides, match", [
    (dict(pool="cls"), "pool must be one of"),
    (dict(pos_embed="alibi"), "pos_embed must be one of"),
    (dict(block="sandwich"), "block must be 'prenorm' or 'postnorm'"),
    (dict(img_size=0), "img_size must be a positive int"),
])
def test_bad_config_values(overrides, match):
    with pytest.raises(ValueError, match=match):
        ViTConfig(**overrides)
