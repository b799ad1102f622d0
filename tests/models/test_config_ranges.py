"""Every numeric, boolean and named field of every model config has a range, checked when the config is made:
a value out of it raises ConfigError naming the field and the range, before anything is allocated."""

import math
from dataclasses import fields

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vitlab.analysis.cost import Workload
from vitlab.checks import Bool, Float, Int, Maybe, OneOf, Pair, Seq
from vitlab.errors import ConfigError
from vitlab.interop import model_from_state
from vitlab.layers.attention import MultiHeadSelfAttention
from vitlab.models import (
    CNNConfig,
    SwinConfig,
    VisionTransformer,
    ViTConfig,
    build_registered,
    count_params,
    get_config,
    list_models,
)
from vitlab.models.config import MAX_PARAMS
from vitlab.models.dense.model import DenseConfig
from vitlab.ops.patches import num_tokens, pad_to_multiple, patchify, unpatchify

# A hostile-input campaign's findings: (config class, field, value). Each must raise ConfigError naming the field.
CAMPAIGN = [
    (ViTConfig, "num_heads", 0),
    (ViTConfig, "depth", -1),
    (ViTConfig, "depth", 0),
    (ViTConfig, "embed_dim", 0),
    (ViTConfig, "patch_size", 0),
    (ViTConfig, "mlp_ratio", -1),
    (ViTConfig, "drop_path_rate", 2),
    (ViTConfig, "attn_drop_rate", -0.5),
    (ViTConfig, "reg_tokens", -3),
    (ViTConfig, "depth", "abc"),
    (ViTConfig, "mlp_ratio", math.nan),
    (ViTConfig, "mlp_ratio", math.inf),
    (ViTConfig, "embed_dim", 10**9),
    (ViTConfig, "depth", 10**6),
    (ViTConfig, "img_size", 10**6),
    (ViTConfig, "qkv_bias", "yes"),
    (ViTConfig, "class_token", 1),
    (ViTConfig, "fc_norm", "no"),
    (ViTConfig, "layer_scale", 0.0),
    (ViTConfig, "norm_eps", 0.0),
    (ViTConfig, "num_classes", -1),
    (ViTConfig, "mlp_ratio", 10**400),
    (ViTConfig, "img_size", (28, 28, 28)),
    (ViTConfig, "depth", 4.0),
    (ViTConfig, "pool", None),
    (SwinConfig, "depths", (2, 0)),
    (SwinConfig, "num_heads", (0, 2, 4, 8)),
    (SwinConfig, "depths", ()),
    (SwinConfig, "mlp_ratio", -1),
    (SwinConfig, "drop_path_rate", 1.0),
    (SwinConfig, "embed_dim", 0),
    (SwinConfig, "window_size", 0),
    (SwinConfig, "qkv_bias", "yes"),
    (CNNConfig, "widths", (8, 0)),
    (CNNConfig, "widths", ()),
    (CNNConfig, "convs_per_stage", 0),
    (CNNConfig, "dropout", 1.0),
    (CNNConfig, "in_chans", 0),
    (CNNConfig, "img_size", -28),
    (DenseConfig, "depth", 0),
    (DenseConfig, "num_heads", 0),
    (DenseConfig, "query_nms", 2.0),
    (DenseConfig, "std", [0.5, 0.0, 0.5]),
    (DenseConfig, "num_queries", 0),
    (DenseConfig, "indices", [99]),
    (Workload, "patch", 0),
    (Workload, "mlp_ratio", math.nan),
    (Workload, "batch", -1),
]
REQUIRED = {Workload: dict(image=224, patch=16)}


@pytest.mark.parametrize("cls, field, value", CAMPAIGN, ids=lambda v: getattr(v, "__name__", repr(v)[:20]))
def test_campaign_findings_raise_a_config_error_naming_the_field(cls, field, value):
    with pytest.raises(ConfigError, match=field) as info:
        cls(**{**REQUIRED.get(cls, {}), field: value})
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


def bad_values(check) -> list:
    """Values ``check`` must refuse: past each end of its range, of the wrong type, NaN."""
    if isinstance(check, Int):
        return [check.low - 1, check.high + 1, "abc", 1.5, True, None]
    if isinstance(check, Float):
        below = check.low if check.low_open else check.low - 1
        above = check.high if check.high_open else check.high + 1
        return [below, above, math.nan, "abc", True]
    if isinstance(check, Bool):
        return ["yes", 1, None]
    if isinstance(check, OneOf):
        return ["no-such-choice", 0]
    if isinstance(check, Maybe):
        return [v for v in bad_values(check.check) if v is not None]
    if isinstance(check, Seq):
        return [
            "abc",
            [] if check.min_len else None,
            [bad_values(check.item)[0]] * check.min_len,
            [bad_values(check.item)[0]] * (check.max_len + 1),
        ]
    if isinstance(check, Pair):
        return [bad_values(check.item)[0], (1, 2, 3), (bad_values(check.item)[1], 1)]
    raise AssertionError(f"no bad values for {check}")


def descriptions(check) -> list[str]:
    """What a message about ``check`` may say: its range, the type a value of the wrong type lacks, or
    what the entry of a list that failed allows."""
    kind = {Int: ["must be an integer,"], Float: ["must be a number,"]}.get(type(check), [])
    return [check.describe()] + kind + (descriptions(check.item) if isinstance(check, Seq) else [])


CONFIGS = [ViTConfig, SwinConfig, CNNConfig, DenseConfig, Workload]
EVERY_CHECK = [
    (cls, name, check, value) for cls in CONFIGS for name, check in cls.checks.items() for value in bad_values(check)
]


@pytest.mark.parametrize(
    "cls, name, check, value", EVERY_CHECK, ids=[f"{c.__name__}.{n}={v!r}"[:60] for c, n, _, v in EVERY_CHECK]
)
def test_every_field_refuses_values_outside_its_range(cls, name, check, value):
    with pytest.raises(ConfigError) as info:
        cls(**{**REQUIRED.get(cls, {}), name: value})
    message = str(info.value)
    assert message.startswith(name) and any(d in message for d in descriptions(check))


# Fields whose values are checked against each other or elsewhere, not by a range of their own.
UNRANGED = {DenseConfig: {"head", "backbone"}}


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_field_has_a_check(cls):
    assert {f.name for f in fields(cls)} - UNRANGED.get(cls, set()) == set(cls.checks)


def test_the_mae_config_checks_its_fields_too():
    from vitlab.tasks.ssl.mae import MAEConfig

    assert {f.name for f in fields(MAEConfig)} == set(MAEConfig.checks)
    for name, check in MAEConfig.checks.items():
        for value in bad_values(check):
            with pytest.raises(ConfigError, match=f"^{name} must be"):
                MAEConfig(**{name: value})
    with pytest.raises(ConfigError, match="decoder_dim 30 must be a multiple of 4"):
        MAEConfig(decoder_dim=30, decoder_heads=3)
    with pytest.raises(ConfigError, match="parameters"):
        MAEConfig(decoder_dim=16384, decoder_depth=1024)


def test_values_that_pass_are_normalised():
    import numpy as np

    cfg = ViTConfig(img_size=[32, 16], depth=np.int64(2), mlp_ratio=2, patch_size=8, embed_dim=16, num_heads=2)
    assert cfg.img_size == (32, 16) and type(cfg.depth) is int and type(cfg.mlp_ratio) is float
    assert ViTConfig.from_dict(cfg.to_dict()) == cfg
    assert SwinConfig(depths=[2, 2], num_heads=[2, 4]).depths == (2, 2)
    assert DenseConfig(indices=(0, -1), depth=2).indices == [0, -1]  # a list, as JSON gives it back


def test_messages_name_the_range_and_the_type():
    with pytest.raises(ConfigError, match=r"^depth must be an integer, got 'abc'$"):
        ViTConfig(depth="abc")
    with pytest.raises(ConfigError, match=r"^depth must be a positive integer in \[1, 1024\], got 0$"):
        ViTConfig(depth=0)
    with pytest.raises(ConfigError, match=r"^mlp_ratio must be a number in \(0, 64\], got nan$"):
        ViTConfig(mlp_ratio=math.nan)
    with pytest.raises(ConfigError, match=r"^drop_path_rate must be a number in \[0, 1\), got 2$"):
        ViTConfig(drop_path_rate=2)
    with pytest.raises(ConfigError, match=r"^qkv_bias must be true or false, got 'yes'$"):
        ViTConfig(qkv_bias="yes")
    with pytest.raises(ConfigError, match=r"got 1+\.\.\.$") as info:  # a huge value is cut, not printed whole
        ViTConfig(embed_dim=int("1" * 500))
    assert len(str(info.value)) < 120


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(img_size=16, patch_size=32), "16x16 is not divisible by patch 32"),
        (dict(img_size=(8, 12), patch_size=8), "8x12 is not divisible by patch 8.*pad=True"),
        (dict(embed_dim=8, num_heads=2, mlp_ratio=0.1), "0 units"),
        (dict(pos_embed="sincos2d", embed_dim=6, num_heads=1), "divisible by 4, got 6"),
        (dict(pos_embed="rope", embed_dim=12, num_heads=2), "head width .* divisible by 4, got 6"),
        (dict(patch_embed="spt", patch_size=1, img_size=8), "patch_size >= 2"),
        (dict(attention="lsa", img_size=4, patch_size=4, class_token=False, pool="mean"), "at least 2 tokens"),
        (dict(attention="linear", attn_drop_rate=0.1), "attn_drop_rate"),
    ],
)
def test_fields_that_relate_are_checked_together(overrides, match):
    with pytest.raises(ConfigError, match=match):
        ViTConfig(**overrides)


def test_a_model_too_large_to_build_is_refused_before_allocating():
    with pytest.raises(ConfigError, match="parameters"):
        ViTConfig(img_size=8192, patch_size=1)  # 67M tokens x 768: a 200 GB position table
    with pytest.raises(ConfigError, match="parameters"):
        ViTConfig(embed_dim=16384, num_heads=16, depth=1024)  # every field in range, the product is not
    with pytest.raises(ConfigError, match="parameters"):
        SwinConfig(embed_dim=2048, depths=(2, 2, 200, 2), num_heads=(32, 64, 128, 256))
    with pytest.raises(ConfigError, match="parameters"):
        CNNConfig(widths=(16384,) * 8, convs_per_stage=8)
    with pytest.raises(ConfigError, match="parameters"):
        DenseConfig(decoder_width=16384, decoder_depth=1024)
    assert ViTConfig(embed_dim=1024, depth=24, num_heads=16).approx_params < MAX_PARAMS  # ViT-L builds


@pytest.mark.parametrize("name", list_models())
def test_the_estimate_is_the_parameter_count_within_two_percent(name):
    count = count_params(build_registered(name), trainable_only=False)
    assert abs(get_config(name).approx_params - count) <= 0.02 * count


def test_a_checkpoint_with_a_config_out_of_range_is_refused():
    state = build_registered("vit-seed").state_dict()
    with pytest.raises(ConfigError, match="num_heads"):
        model_from_state(state, num_heads=0)
    with pytest.raises(ConfigError, match="img_size"):
        model_from_state(state, resize_to=0, num_heads=4)
    with pytest.raises(ConfigError, match="img_size"):
        model_from_state(state, resize_to=10**6, num_heads=4)
    with pytest.raises(ConfigError, match="depth"):  # no blocks at all: depth 0
        model_from_state({k: v for k, v in state.items() if not k.startswith("blocks.")}, num_heads=4)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: MultiHeadSelfAttention(16, 0), "num_heads must be a positive integer, got 0"),
        (lambda: MultiHeadSelfAttention(0, 1), "dim must be a positive integer, got 0"),
        (lambda: MultiHeadSelfAttention(16, 2.0), "num_heads must be a positive integer"),
        (lambda: MultiHeadSelfAttention(16, 3), "not divisible by num_heads 3"),
        (lambda: MultiHeadSelfAttention(16, 2, attn_drop=1.5), r"attn_drop must be a probability in \[0, 1\)"),
        (lambda: MultiHeadSelfAttention(16, 2, norm_eps=0), "norm_eps must be positive"),
        (lambda: patchify(torch.zeros(1, 1, 8, 8), 0), "patch_size must be a positive integer, got 0"),
        (lambda: patchify(torch.zeros(1, 1, 8, 8), 0, pad=True), "patch_size must be a positive integer"),
        (lambda: pad_to_multiple(torch.zeros(1, 1, 8, 8), -2), "patch_size must be a positive integer"),
        (lambda: unpatchify(torch.zeros(1, 4, 16), 0, 2), "patch_size must be a positive integer"),
        (lambda: num_tokens(8, 8, 0, pad=True), "patch_size must be a positive integer"),
    ],
)
def test_layers_and_ops_check_their_arguments(call, match):
    with pytest.raises(ConfigError, match=match):
        call()


# Tiny ViT configs, each field in its range: every kind of attention, position, pooling and patch embedding,
# with sizes that do not always fit together (a patch larger than the image, heads that do not divide the width).
VIT_OVERRIDES = st.fixed_dictionaries(
    {
        "img_size": st.sampled_from([2, 4, 8, (8, 12), (6, 4)]),
        "patch_size": st.integers(1, 5),
        "in_chans": st.integers(1, 2),
        "num_classes": st.integers(0, 3),
        "embed_dim": st.sampled_from([4, 8, 12, 16]),
        "depth": st.integers(1, 2),
        "num_heads": st.sampled_from([1, 2, 4, 3]),
        "mlp_ratio": st.sampled_from([2.0, 0.25, 0.1]),
        "qkv_bias": st.booleans(),
        "qk_norm": st.booleans(),
        "pos_embed": st.sampled_from(["learned", "sincos1d", "sincos2d", "rowcol", "rope", "none"]),
        "pool": st.sampled_from(["mean", "token", "max"]),
        "pre_norm": st.booleans(),
        "final_norm": st.booleans(),
        "fc_norm": st.sampled_from([None, True, False]),
        "block": st.sampled_from(["prenorm", "postnorm"]),
        "layer_scale": st.sampled_from([None, 1e-5]),
        "patch_embed": st.sampled_from(["conv", "linear", "spt"]),
        "attention": st.sampled_from(["full", "lsa", "window", "linear", "lowrank", "latent"]),
        "window_size": st.integers(1, 3),
        "lowrank_k": st.integers(1, 3),
        "num_latents": st.integers(1, 3),
        "pad": st.booleans(),
        "dynamic_img_size": st.booleans(),
        "drop_rate": st.sampled_from([0.0, 0.5]),
        "attn_drop_rate": st.sampled_from([0.0, 0.5]),
        "drop_path_rate": st.sampled_from([0.0, 0.5]),
    }
)
PREFIXES = st.sampled_from(
    [
        dict(class_token=c, reg_tokens=r, distill_token=d)  # none, as windows need
        for c, r, d in [(False, 0, False), (True, 0, False), (True, 2, True), (False, 1, False), (True, 0, True)]
    ]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VIT_OVERRIDES, PREFIXES)
def test_any_vit_config_accepted_builds_a_model_that_runs(overrides, prefix):
    overrides = {**overrides, **prefix}
    try:
        cfg = ViTConfig(**overrides)
    except ConfigError:
        return
    model = VisionTransformer(cfg)
    images = torch.randn(2, cfg.in_chans, *cfg.img_size)
    for train in (False, True):
        out = model.train(train)(images)
        logits = out[0] if isinstance(out, tuple) else out
        assert logits.shape == (2, cfg.num_classes or cfg.embed_dim) and torch.isfinite(logits).all()


SWIN_OVERRIDES = st.fixed_dictionaries(
    {
        "img_size": st.sampled_from([4, 8, 13, (6, 9)]),
        "patch_size": st.integers(1, 5),
        "in_chans": st.integers(1, 2),
        "num_classes": st.integers(0, 3),
        "embed_dim": st.sampled_from([2, 4, 6]),
        "depths": st.lists(st.integers(1, 2), min_size=1, max_size=3).map(tuple),
        "num_heads": st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3).map(tuple),
        "window_size": st.integers(1, 4),
        "mlp_ratio": st.sampled_from([1.0, 0.25]),
        "drop_path_rate": st.just(0.5),
    }
)


@settings(max_examples=60, deadline=None)
@given(SWIN_OVERRIDES)
def test_any_swin_config_accepted_builds_a_model_that_runs(overrides):
    from vitlab.models import SwinTransformer

    try:
        cfg = SwinConfig(**overrides)
    except ConfigError:
        return
    logits = SwinTransformer(cfg).eval()(torch.randn(1, cfg.in_chans, *cfg.img_size))
    assert logits.shape == (1, cfg.num_classes or cfg.dims[-1]) and torch.isfinite(logits).all()
