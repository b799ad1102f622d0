"""VisionTransformer against the NumPy reference (float64), its symmetries, and its errors."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import vitlab.reference as ref
from vitlab import ViTConfig, create_model, patchify, unpatchify
from vitlab.errors import ConfigError
from vitlab.layers.position import Rotary2d
from vitlab.models import VisionTransformer

CONFIGS = {
    "seed": ("vit-seed", {}),  # learned, mean pool, norm on every token
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

N = 16  # vit-digits: 8x8 images, 2x2 patches


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
        torch.testing.assert_close(model(shuffled), model(images), rtol=0, atol=1e-10)  # mean pool: invariant


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
        model.set_image_size(28)  # same grid: the identity
        assert torch.equal(model.pos_embed.weight, table)
        torch.testing.assert_close(model(images), before, rtol=0, atol=0)
        model.set_image_size((42, 35))
        assert model.pos_embed.weight.shape == (1, 6 * 5, 64)
        assert model(torch.randn(2, 1, 42, 35, dtype=torch.float64)).shape == (2, 10)
    with pytest.raises(ValueError, match="differs from the model's img_size 42x35"):
        model(images)


def test_sincos_model_at_a_new_image_size_matches_the_reference():
    model = build("vit-seed", dict(pos_embed="sincos2d"))
    assert not [n for n, _ in model.named_parameters() if n.startswith("pos_embed")]  # a fixed buffer
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


@pytest.mark.parametrize(
    "overrides",
    [
        dict(class_token=True, pool="token"),
        dict(class_token=True, pool="token", attention="lsa", reg_tokens=2),
        dict(class_token=True, pool="token", attention="linear"),
        dict(class_token=True, pool="token", attention="lowrank", lowrank_k=5),
        dict(class_token=True, pool="token", attention="latent", num_latents=3),
        dict(class_token=True, pool="token", block="postnorm", qk_norm=True),
        dict(class_token=True, pool="token", pos_embed="rope"),
        dict(class_token=True, pool="token", pos_embed="rope", reg_tokens=2, distill_token=True),
    ],
)
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


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(pool="cls"), "pool must be one of"),
        (dict(pos_embed="alibi"), "pos_embed must be one of"),
        (dict(block="sandwich"), "block must be 'prenorm' or 'postnorm'"),
        (dict(img_size=0), "img_size must be a positive int"),
    ],
)
def test_bad_config_values(overrides, match):
    with pytest.raises(ValueError, match=match):
        ViTConfig(**overrides)


# ---- the encoder's hooks: each path against a computation by hand ----------------------------------


def blocks_by_hand(model, x, rope, grid):
    """The blocks and the final norm, one after the other, on tokens ``x`` with rotary tables ``rope``."""
    for block in model.blocks:
        x = block(x, rope, grid)
    return model.norm(x)


def rotary_by_hand(model, grid, prefix):
    """Rotary ``(sin, cos)`` with ``prefix`` identity rows (sin 0, cos 1) ahead of the patch rows."""
    sin, cos = Rotary2d(grid, model.config.embed_dim // model.config.num_heads, 0).tables(grid)
    eye = torch.zeros(prefix, sin.shape[1], dtype=sin.dtype)
    return torch.cat([eye, sin]), torch.cat([eye + 1, cos])


@pytest.mark.parametrize(
    "overrides",
    [
        dict(class_token=True, pool="token", reg_tokens=2, pre_norm=True),
        dict(pos_embed="rope", class_token=True, reg_tokens=1),
        dict(pos_embed="rope", class_token=False, pool="mean", attention="latent", num_latents=3),
    ],
)
def test_kept_tokens_run_the_blocks_by_hand_with_their_own_rotary_rows(overrides):
    model = build("vit-digits", overrides)
    images = images_for(model, batch=3)
    keep = torch.stack([torch.randperm(N)[:6] for _ in range(3)])
    r = model.num_prefix_tokens
    with torch.no_grad():
        tokens = model.pos_embed(model.patch_embed(images), (4, 4))
        x = torch.cat(model.prefix_tokens(3) + [torch.stack([t[k] for t, k in zip(tokens, keep)])], dim=1)
        rope = None
        if model.rope is not None:
            sin, cos = rotary_by_hand(model, (4, 4), r)
            rows = torch.cat([torch.arange(r).expand(3, -1), r + keep], dim=1)  # (B, R + K)
            rope = sin[rows][:, None], cos[rows][:, None]  # (B, 1, R + K, d)
        expected = blocks_by_hand(model, model.norm_pre(x), rope, (4, 4))
        torch.testing.assert_close(model.forward_features(images, keep=keep), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("pos_embed", ["learned", "rope"])
def test_keeping_every_token_shuffled_shuffles_the_encoded_tokens(pos_embed):
    """Positions travel with their tokens (rotary ones too), so the blocks are equivariant to the order kept."""
    model = build("vit-digits", dict(pos_embed=pos_embed, class_token=True, reg_tokens=1))
    images = images_for(model)
    order = torch.stack([torch.randperm(N), torch.arange(N)])
    with torch.no_grad():
        full = model.forward_features(images)
        shuffled = model.forward_features(images, keep=order)
    torch.testing.assert_close(shuffled[:, :2], full[:, :2], rtol=0, atol=1e-12)
    torch.testing.assert_close(
        shuffled[:, 2:], torch.stack([f[2:][o] for f, o in zip(full, order)]), rtol=0, atol=1e-12
    )


def test_keep_is_refused_where_attention_needs_the_whole_grid():
    model = create_model("vit-digits", attention="window", window_size=2)
    with pytest.raises(ConfigError, match="attention='window' needs every patch token"):
        model.forward_features(torch.rand(1, 1, 8, 8), keep=torch.zeros(1, 4, dtype=torch.long))


@pytest.mark.parametrize(
    "overrides",
    [
        dict(class_token=True, pool="token", reg_tokens=2),
        dict(pos_embed="rope", class_token=True, pool="token"),
        dict(pos_embed="sincos2d", class_token=False, pool="mean", fc_norm=True),
    ],
)
def test_distillation_token_sits_after_the_prefix_tokens(overrides):
    model = build("vit-digits", {**overrides, "distill_token": True})
    images = images_for(model)
    r = model.num_prefix_tokens - 1  # class + registers
    with torch.no_grad():
        patches = model.pos_embed(model.patch_embed(images), (4, 4))
        prefix = [t.expand(2, -1, -1) for t in (model.class_token, model.reg_token) if t is not None]
        x = torch.cat(prefix + [model.dist_token.expand(2, -1, -1), patches], dim=1)
        rope = rotary_by_hand(model, (4, 4), r + 1) if model.rope is not None else None
        tokens = blocks_by_hand(model, x, rope, (4, 4))
        torch.testing.assert_close(model.forward_features(images), tokens, rtol=0, atol=1e-12)
        pooled = tokens[:, 0] if model.config.pool == "token" else tokens[:, r + 1 :].mean(dim=1)
        cls = model.head(model.fc_norm(pooled))
        dist = model.head_dist(model.fc_norm(tokens[:, r]))
        torch.testing.assert_close(model(images), (cls + dist) / 2, rtol=0, atol=1e-12)
        train_cls, train_dist = model.train()(images)
    torch.testing.assert_close(train_cls, cls, rtol=0, atol=1e-12)
    torch.testing.assert_close(train_dist, dist, rtol=0, atol=1e-12)


def test_a_student_is_rebuilt_from_its_config_alone():
    student = create_model("vit-digits", distill_token=True)
    plain = create_model("vit-digits")
    assert set(student.state_dict()) == set(plain.state_dict()) | {"dist_token", "head_dist.weight", "head_dist.bias"}
    again = VisionTransformer(ViTConfig.from_dict(student.config.to_dict()))
    again.load_state_dict(student.state_dict(), strict=True)
    images = torch.rand(2, 1, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(again.eval()(images), student.eval()(images), rtol=0, atol=0)
    student.reset_classifier(3)
    assert student.train()(images)[1].shape == (2, 3)
    assert "dist_token" in student.no_weight_decay()


@pytest.mark.parametrize(
    "overrides",
    [
        dict(class_token=True, pool="token", reg_tokens=2),
        dict(pos_embed="rope", class_token=True, pool="token", distill_token=True),
        dict(class_token=False, pool="mean"),
    ],
)
def test_intermediates_are_the_blocks_outputs_by_hand(overrides):
    model = build("vit-digits", overrides)
    images = images_for(model)
    r = model.num_prefix_tokens
    with torch.no_grad():
        x, _ = model.embed(images)
        rope = rotary_by_hand(model, (4, 4), r) if model.rope is not None else None
        outputs = []
        for block in model.blocks:
            x = block(x, rope, (4, 4))
            outputs.append(x)
        final, maps = model.forward_intermediates(images, [2, -4], return_prefix_tokens=True)
        normed = model.forward_intermediates(images, 2, norm=True, output_fmt="NLC", intermediates_only=True)
        early, _ = model.forward_intermediates(images, [1], stop_early=True)
    torch.testing.assert_close(final, model.norm(outputs[-1]), rtol=0, atol=1e-12)
    assert len(maps) == 2 and len(normed) == 2
    for taken, i in zip(maps, [0, 2]):
        patches, prefix = taken if r else (taken, outputs[i][:, :0])  # (patches, prefix) pairs when R > 0
        assert patches.shape == (2, 64, 4, 4)
        torch.testing.assert_close(patches.flatten(2).transpose(1, 2), outputs[i][:, r:], rtol=0, atol=1e-12)
        torch.testing.assert_close(prefix, outputs[i][:, :r], rtol=0, atol=1e-12)
    for tokens, i in zip(normed, [2, 3]):
        torch.testing.assert_close(tokens, model.norm(outputs[i])[:, r:], rtol=0, atol=1e-12)
    torch.testing.assert_close(early, model.norm(outputs[1]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("indices, match", [([4], "out of range"), ([-5], "out of range"), (0, "1..4"), (5, "1..4")])
def test_intermediate_indices_out_of_range(indices, match):
    with pytest.raises(ConfigError, match=match):
        create_model("vit-digits").forward_intermediates(torch.rand(1, 1, 8, 8), indices)


@pytest.mark.parametrize(
    "options",
    [dict(), dict(reg_tokens=2, global_pool="avg"), dict(class_token=False, global_pool="avg")],
    ids=["class-token", "registers", "no-prefix"],
)
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(indices=1, norm=True),
        dict(indices=[-1, 0], return_prefix_tokens=True),
        dict(indices=(0,), stop_early=True, output_fmt="NLC"),
        dict(indices=2, intermediates_only=True),
    ],
    ids=["all", "last-normed", "prefix", "stop-early-nlc", "only"],
)
def test_intermediates_match_timms(options, kwargs):
    pytest.importorskip("timm")
    from timm.models.vision_transformer import VisionTransformer as TimmViT

    from vitlab.interop import from_timm

    source = TimmViT(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=5, **options).eval()
    with torch.no_grad():
        for p in source.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model = from_timm(source)
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        got, expected = model.forward_intermediates(images, **kwargs), source.forward_intermediates(images, **kwargs)
    got, expected = (
        (got, expected) if kwargs.get("intermediates_only") else ([got[0], *got[1]], [expected[0], *expected[1]])
    )
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        for x, y in zip(a, b) if isinstance(a, tuple) else [(a, b)]:
            assert x.shape == y.shape
            torch.testing.assert_close(x, y, rtol=0, atol=1e-5)


def test_group_matcher_groups_the_stem_and_each_block_as_timm_does():
    group_parameters = pytest.importorskip("timm.models._manipulate").group_parameters
    model = create_model("vit-digits", class_token=True, reg_tokens=1, distill_token=True, pre_norm=True)
    groups = group_parameters(model, model.group_matcher())
    names = {
        g: sorted({n.split(".")[0] + ("." + n.split(".")[1] if n.startswith("blocks.") else "") for n in ns})
        for g, ns in groups.items()
    }
    assert names == {
        0: ["class_token", "dist_token", "norm_pre", "patch_embed", "pos_embed", "reg_token"],
        1: ["blocks.0"],
        2: ["blocks.1"],
        3: ["blocks.2"],
        4: ["blocks.3", "norm"],
        5: ["head", "head_dist"],
    }
