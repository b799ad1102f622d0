"""Maps against oracles: hand-computed rollout, a linear model's gradients, one-at-a-time occlusion,
and a task whose label is decided by one known patch."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from vitlab.data import normalize
from vitlab.explain.audit import AuditOptions, audit
from vitlab.explain.maps import (
    compute_maps,
    gradient_map,
    head_statistics,
    masked_probs,
    occlusion_map,
    query_attention,
    query_rows,
    rollout_map,
    rollout_matrix,
)
from vitlab.explain.record import attention_weights
from vitlab.explain.synthetic import make_key_patch, patch_patterns
from vitlab.models import build_registered
from vitlab.models.vit import VisionTransformer
from vitlab.models.vit_config import ViTConfig


def tiny_vit(**options) -> VisionTransformer:
    base = dict(img_size=8, patch_size=2, in_chans=1, num_classes=3, embed_dim=16, depth=3, num_heads=2)
    return VisionTransformer(ViTConfig(**{**base, **options})).eval()


def test_rollout_of_two_tokens_by_hand():
    half = torch.full((1, 1, 2, 2), 0.5)  # one head attending uniformly
    # (A + I) / 2 = [[.75, .25], [.25, .75]]; squared: [[.625, .375], [.375, .625]]
    expected = torch.tensor([[[0.625, 0.375], [0.375, 0.625]]])
    torch.testing.assert_close(rollout_matrix([half, half]), expected)


def test_rollout_equals_the_product_of_residual_averaged_layers():
    model = tiny_vit(pool="token", class_token=True)
    _, weights = attention_weights(model, torch.rand(2, 1, 8, 8))
    for b in range(2):
        product = np.eye(17)
        for layer in weights:  # the hand computation, in float64
            mixed = 0.5 * layer[b].double().numpy().mean(0) + 0.5 * np.eye(17)
            mixed /= mixed.sum(1, keepdims=True)
            product = mixed @ product
        torch.testing.assert_close(rollout_matrix(weights)[b].double(), torch.from_numpy(product))
        cls_row = product[0, 1:] / product[0, 1:].sum()
        torch.testing.assert_close(
            rollout_map(weights, "cls", 1, (4, 4))[b].double(), torch.from_numpy(cls_row).reshape(4, 4)
        )
        mean_row = product[1:, 1:].mean(0) / product[1:, 1:].mean(0).sum()
        torch.testing.assert_close(
            rollout_map(weights, "mean", 1, (4, 4))[b].double(), torch.from_numpy(mean_row).reshape(4, 4)
        )


def test_query_attention_reads_the_right_rows():
    weights = [torch.rand(2, 3, 5, 5).softmax(-1) for _ in range(2)]  # 1 prefix + 2x2 patches
    maps = query_attention(weights, "cls", 1, (2, 2))
    assert maps.shape == (2, 2, 3, 2, 2)
    torch.testing.assert_close(maps[:, 1].flatten(-2), weights[1][:, :, 0, 1:])
    torch.testing.assert_close(query_attention(weights, 2, 1, (2, 2))[:, 0].flatten(-2), weights[0][:, :, 3, 1:])
    torch.testing.assert_close(query_rows(weights[0], "mean", 1), weights[0][:, :, 1:].mean(-2))
    with pytest.raises(ValueError, match="class token"):
        query_rows(weights[0], "cls", 0)
    with pytest.raises(ValueError, match="patch index"):
        query_rows(weights[0], 4, 1)


def test_gradient_maps_of_a_linear_model():
    model = nn.Sequential(nn.Flatten(), nn.Linear(2 * 4 * 4, 3))  # any classifier, patch size given
    x = torch.randn(2, 2, 4, 4)
    target = torch.tensor([2, 0])
    w = model[1].weight.detach()[target].reshape(2, 2, 4, 4)  # d logit_c / d x
    per_patch = lambda t: t.abs().reshape(2, 2, 2, 2, 2, 2).sum((1, 3, 5))  # (B, C, gh, P, gw, P)
    torch.testing.assert_close(gradient_map(model, x, target, patch_size=2), per_patch(w))
    torch.testing.assert_close(gradient_map(model, x, target, patch_size=2, times_input=True), per_patch(w * x))


def test_occlusion_matches_masking_one_patch_at_a_time():
    model = tiny_vit(pool="token", class_token=True)
    x = torch.randn(3, 1, 8, 8)
    maps = occlusion_map(model, x, baseline=0.5)
    with torch.no_grad():
        probs = model(x).softmax(-1)
        target = probs.argmax(-1)
        for patch in range(16):
            r, c = divmod(patch, 4)
            hidden = x.clone()
            hidden[..., 2 * r : 2 * r + 2, 2 * c : 2 * c + 2] = 0.5
            drop = probs[range(3), target] - model(hidden).softmax(-1)[range(3), target]
            torch.testing.assert_close(maps[:, r, c], drop)
    keep = torch.rand(3, 5, 16) > 0.5
    torch.testing.assert_close(
        masked_probs(model, x, keep, target, 2, batch_size=4), masked_probs(model, x, keep, target, 2)
    )


def test_compute_maps_shapes_and_errors():
    model = tiny_vit(pool="mean", class_token=False)
    maps = compute_maps(model, torch.randn(2, 1, 8, 8))
    assert {k: tuple(v.shape) for k, v in maps.items()} == {m: (2, 4, 4) for m in maps} and len(maps) == 5
    torch.testing.assert_close(maps["rollout"].sum((1, 2)), torch.ones(2))
    with pytest.raises(ValueError, match="unknown map method"):
        compute_maps(model, torch.randn(1, 1, 8, 8), ["saliency"])
    cnn = build_registered("cnn-digits")
    with pytest.raises(ValueError, match="patch_size"):
        compute_maps(cnn.eval(), torch.randn(1, 1, 8, 8), ["occlusion"])
    assert compute_maps(cnn, torch.randn(1, 1, 8, 8), ["occlusion"], patch_size=4)["occlusion"].shape == (1, 2, 2)


def test_head_statistics_of_uniform_and_one_hot_rows():
    n = 16
    uniform = head_statistics(torch.full((n,), 1 / n))
    assert float(uniform["spread"]) == pytest.approx(0) and float(uniform["uniform_distance"]) == pytest.approx(0)
    assert float(uniform["entropy"]) == pytest.approx(math.log(n))
    one_hot = head_statistics(torch.eye(n)[3])
    assert float(one_hot["spread"]) == 1 and float(one_hot["entropy"]) == pytest.approx(0)
    assert float(one_hot["uniform_distance"]) == pytest.approx(1 - 1 / n)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 40), st.floats(0.1, 10.0), st.integers(0, 2**31 - 1))
def test_head_statistics_bounds(n, scale, seed):
    rows = (torch.randn(3, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale).softmax(-1)
    stats = head_statistics(rows)
    assert torch.all(stats["spread"] >= 0) and torch.all(stats["spread"] <= 1)
    assert torch.all(stats["entropy"] <= math.log(n) + 1e-9)
    assert torch.all(stats["uniform_distance"] <= 1 - 1 / n + 1e-9)
    assert torch.all(stats["max"] >= 1 / n - 1e-12) and torch.all(stats["min"] <= 1 / n + 1e-12)


@pytest.mark.parametrize("key_patch", [0, 6, 15])
def test_key_patch_task_is_labelled_by_its_key_patch(key_patch):
    data = make_key_patch(200, image_size=8, patch_size=2, key_patch=key_patch, num_classes=4, noise=0.0)
    r, c = divmod(key_patch, 4)
    key = data.images[:, 0, 2 * r : 2 * r + 2, 2 * c : 2 * c + 2]
    patterns = patch_patterns(4, 2)
    decoded = (key[:, None] == patterns[None]).all(-1).all(-1).float().argmax(1)
    assert torch.equal(decoded, data.labels)
    assert torch.bincount(data.labels).tolist() == [50] * 4


@pytest.mark.slow
def test_maps_find_the_known_patch(key_patch_run):
    model, splits, key = key_patch_run.model, key_patch_run.splits, key_patch_run.key_patch
    assert key_patch_run.val_acc > 0.95
    inputs = normalize(splits.val.images, splits.mean, splits.std)
    maps = compute_maps(model, inputs, ["gradient", "occlusion"])
    for method in ("gradient", "occlusion"):
        assert (maps[method].flatten(1).argmax(1) == key).float().mean() > 0.95, method
    result = audit(model, splits, AuditOptions(samples=len(splits.val), key_patch=key))
    for method in ("attention", "rollout", "occlusion"):
        top1 = result.row(method).key_patch_top1
        assert 0 <= top1 <= 1
    assert result.row("occlusion").key_patch_top1 > 0.95
    rollout = compute_maps(model, inputs, ["rollout"])["rollout"]
    assert result.row("rollout").key_patch_top1 == pytest.approx(
        float((rollout.flatten(1).argmax(1) == key).float().mean())
    )
