"""The token-count cost model against arithmetic, a real FLOP count, and a real score tensor."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from vitlab.analysis.cost import TEXTBOOK_PAIRS, Workload, attention_cost, cost_table, flops, full_attention
from vitlab.models import VisionTransformer, ViTConfig


@settings(max_examples=50, deadline=None)
@given(
    grid=st.integers(1, 40),
    patch=st.integers(1, 32),
    class_token=st.booleans(),
    heads=st.integers(1, 8),
    batch=st.integers(1, 4),
)
def test_entries_are_tokens_squared(grid, patch, class_token, heads, batch):
    work = Workload(image=grid * patch, patch=patch, dim=8 * heads, heads=heads, batch=batch, class_token=class_token)
    n = grid * grid + int(class_token)
    cost = attention_cost(work)
    assert work.tokens == n
    assert cost.entries == n * n
    assert cost.memory == batch * heads * n * n * 4
    head_dim = 8
    assert cost.score_flops == cost.value_flops == 2 * batch * heads * n * n * head_dim


def test_textbook_table_rows():
    rows = cost_table()
    first = (28 // 7) ** 4
    assert [(r.image, r.patch) for r in rows] == list(TEXTBOOK_PAIRS)
    for r in rows:
        assert r.tokens == (r.image // r.patch) ** 2
        assert r.entries == r.tokens**2
        assert r.ratio == r.entries / first
    assert rows[0].ratio == 1.0


def test_halving_the_patch_multiplies_entries_by_sixteen():
    coarse, fine = cost_table(((224, 16), (224, 8)))
    assert fine.tokens == 4 * coarse.tokens and fine.entries == 16 * coarse.entries and fine.ratio == 16


def measured_flops(config: ViTConfig, batch: int) -> dict[str, int]:
    model = VisionTransformer(config).eval()
    for block in model.blocks:  # the explicit attention path: its matmuls are counted, the
        block.attn.fused = False  # CPU fused kernel's are not
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model.forward_features(torch.randn(batch, config.in_chans, *config.img_size))  # the whole encoder
    counts = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    return {"total": counter.get_total_flops(), "conv": counts.get("aten.convolution", 0)}


@pytest.mark.parametrize(
    "image, patch, dim, depth, heads, mlp_ratio, class_token, chans, batch",
    [
        (32, 8, 64, 2, 4, 2.0, True, 3, 2),
        (28, 7, 64, 2, 4, 2.0, False, 1, 1),
        (24, 4, 48, 3, 6, 4.0, True, 3, 3),
    ],
)
def test_flops_match_a_measured_count(image, patch, dim, depth, heads, mlp_ratio, class_token, chans, batch):
    config = ViTConfig(
        img_size=image,
        patch_size=patch,
        in_chans=chans,
        num_classes=0,
        embed_dim=dim,
        depth=depth,
        num_heads=heads,
        mlp_ratio=mlp_ratio,
        class_token=class_token,
        pool="token" if class_token else "mean",
    )
    estimate = flops(
        Workload(
            image,
            patch,
            dim=dim,
            depth=depth,
            heads=heads,
            mlp_ratio=mlp_ratio,
            batch=batch,
            class_token=class_token,
            in_chans=chans,
        )
    )
    measured = measured_flops(config, batch)
    assert abs(estimate["total"] - measured["total"]) <= 0.02 * measured["total"]
    assert estimate["patch_embed"] == measured["conv"]
    assert estimate["total"] == sum(v for k, v in estimate.items() if k != "total")


def test_score_memory_is_the_real_weight_tensor():
    config = ViTConfig(
        img_size=32, patch_size=4, in_chans=3, num_classes=0, embed_dim=32, depth=1, num_heads=4, class_token=True
    )
    model = VisionTransformer(config).eval()
    tokens = torch.randn(2, 8 * 8 + 1, 32)
    _, weights = model.blocks[0].attn.forward_with_weights(tokens)
    work = Workload(32, 4, dim=32, depth=1, heads=4, batch=2, class_token=True)
    assert attention_cost(work).memory == weights.numel() * weights.element_size()
    assert attention_cost(work).entries == weights.shape[-1] * weights.shape[-2]


def test_full_attention_is_quadratic():
    small, large = full_attention(100, 64, 4), full_attention(300, 64, 4)
    assert large.entries == 9 * small.entries and large.score_flops == 9 * small.score_flops


@pytest.mark.parametrize(
    "call",
    [
        lambda: cost_table(((30, 7),)),  # patch does not divide image
        lambda: cost_table(((224, 16),), attention="dilated"),
        lambda: cost_table(((224, 16),), dim=100, heads=12),
        lambda: cost_table(()),
        lambda: Workload(224, 16, batch=0),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()
