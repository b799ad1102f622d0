"""Parameter tables against independent arithmetic."""

import pytest
import torch
from torch import nn

from vitlab.analysis.params import parameter_table, trainable_position_params
from vitlab.layers import attention
from vitlab.models import build_registered, count_params, vit_config


def rows_by_name(model):
    return {r.component: r for r in parameter_table(model)}


def test_vit_seed_components_match_arithmetic():
    d, hidden, patch_values, tokens, classes = 64, 128, 7 * 7 * 1, (28 // 7) ** 2, 10
    rows = rows_by_name(build_registered("vit-seed"))
    attention = 4 * (d * d + d)
    mlp = d * hidden + hidden + hidden * d + d
    assert (rows["patch projection"].size, rows["patch projection"].params) == ("49 -> 64", patch_values * d + d)
    assert (rows["position embedding"].size, rows["position embedding"].params) == ("16 x 64", tokens * d)
    for i in (1, 2):
        assert rows[f"block {i} attention (Q, K, V, out)"].params == attention
        assert rows[f"block {i} MLP"].size == "64 -> 128 -> 64"
        assert rows[f"block {i} MLP"].params == mlp
        assert rows[f"block {i} norms"].params == 2 * 2 * d
    expected = patch_values * d + d + tokens * d + 2 * (attention + mlp + 4 * d) + 2 * d + d * classes + classes
    assert expected == 71_946  # the textbook's Keras model
    assert sum(r.params for r in rows.values()) == expected
    assert sum(p.numel() for p in build_registered("vit-seed").parameters()) == expected


def test_fixed_positions_remove_exactly_the_table():
    learned, fixed = build_registered("vit-seed"), build_registered("vit-seed-sincos")
    positions = trainable_position_params(learned)
    assert positions == rows_by_name(learned)["position embedding"].params
    assert count_params(learned) - positions == count_params(fixed)
    assert trainable_position_params(fixed) == 0
    assert "position embedding" not in rows_by_name(fixed)  # a buffer, not a parameter


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        dict(
            class_token=True,
            pool="token",
            reg_tokens=3,
            layer_scale=1e-5,
            qk_norm=True,
            qkv_bias=False,
            pos_embed="rowcol",
            pre_norm=True,
        ),
        dict(fc_norm=True, depth=3, mlp_ratio=3.0),
    ],
)
def test_every_parameter_lands_in_exactly_one_row(overrides):
    model = build_registered("vit-seed", **overrides)
    rows = parameter_table(model)
    assert sum(r.params for r in rows) == sum(p.numel() for p in model.parameters())
    assert "other" not in {r.component for r in rows}
    assert len({r.component for r in rows}) == len(rows)


@pytest.mark.parametrize(
    "overrides",
    [
        dict(patch_embed=kind, patch_size=4 if "stem" in kind else 7)
        for kind in getattr(vit_config, "PATCH_EMBEDS", ("conv",))
    ]
    + [dict(attention=kind) for kind in getattr(attention, "ATTENTION_KINDS", ("full",))],
)
def test_every_patch_embedding_and_attention_kind_is_covered(overrides):
    model = build_registered("vit-seed", **overrides)
    rows = rows_by_name(model)
    assert sum(r.params for r in rows.values()) == sum(p.numel() for p in model.parameters())
    assert "other" not in rows
    projection = f"{model.patch_embed.proj.weight[0].numel()} -> 64"
    stem = overrides.get("patch_embed", "")
    if "stem" in stem:  # the stem's convolutions are counted in the same row, and said so
        stem_params = sum(p.numel() for p in model.patch_embed.backbone.parameters())
        assert rows["patch projection"].size.startswith(f"{stem} ({stem_params:,} parameters) + {projection}")
    else:
        assert rows["patch projection"].size.startswith(projection)


def test_row_sizes_follow_the_config():
    rows = rows_by_name(
        build_registered("vit-seed", class_token=True, pool="token", reg_tokens=3, qkv_bias=False, pos_embed="rowcol")
    )
    assert rows["class token"].size == "1 x 64" and rows["class token"].params == 64
    assert rows["register tokens"].size == "3 x 64" and rows["register tokens"].params == 3 * 64
    assert rows["position embedding"].params == (4 + 4) * 64
    assert rows["block 1 attention (Q, K, V, out)"].params == 4 * 64 * 64 + 64


def test_frozen_parameters_count_but_are_not_trainable():
    model = build_registered("vit-seed")
    model.pos_embed.requires_grad_(False)
    row = rows_by_name(model)["position embedding"]
    assert (row.params, row.trainable) == (16 * 64, 0)
    assert count_params(model, trainable_only=False) - count_params(model) == 16 * 64
    assert trainable_position_params(model) == 0


def test_cnn_rows_per_stage():
    model = build_registered("cnn-seed", widths=(6, 10), convs_per_stage=2, num_classes=4)
    rows = rows_by_name(model)
    assert rows["stage 1"].params == 9 * 1 * 6 + 2 * 6 + 9 * 6 * 6 + 2 * 6
    assert rows["stage 2"].params == 9 * 6 * 10 + 2 * 10 + 9 * 10 * 10 + 2 * 10
    assert rows["head"].params == 10 * 4 + 4 and rows["head"].size == "10 -> 4"
    assert list(rows) == ["stage 1", "stage 2", "head"]


def test_unknown_models_and_unclaimed_parameters():
    rows = parameter_table(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
    assert [(r.component, r.params) for r in rows] == [("0", 16), ("2", 10)]
    model = build_registered("vit-seed")
    model.extra = nn.Parameter(torch.zeros(5))
    assert rows_by_name(model)["other"].params == 5
