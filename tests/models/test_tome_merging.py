"""Token merging: r = 0 is the identity, merging duplicates loses nothing, sizes add up, refusals."""

import pytest
import torch

from vitlab.layers import Block
from vitlab.layers.tome import bipartite_soft_matching, merge_wavg, merging_block
from vitlab.models import VisionTransformer, ViTConfig, apply_tome, front_loaded


def vit(**overrides) -> VisionTransformer:
    config = dict(img_size=24, patch_size=4, in_chans=1, num_classes=5, embed_dim=16, depth=4, num_heads=2)
    return VisionTransformer(ViTConfig(**{**config, **overrides})).eval()


@pytest.mark.parametrize("overrides", [{}, dict(class_token=False, pool="mean", fc_norm=False), dict(reg_tokens=2)])
def test_r_zero_is_the_identity(overrides):
    model = vit(**overrides)
    images = torch.randn(3, 1, 24, 24)
    with torch.no_grad():
        assert torch.equal(apply_tome(model, 0)(images), model(images))


def test_merging_duplicates_changes_no_token():
    """Tokens that come in identical pairs: merging a pair into one token of size 2 and weighing it
    twice in attention (log 2) is exact, so every merged output is one of the unmerged outputs."""
    torch.manual_seed(1)
    block = Block(16, 2).eval()
    half = torch.randn(1, 10, 16)
    x = half.repeat_interleave(2, dim=1)  # tokens 2i and 2i+1 equal
    with torch.no_grad():
        unmerged = block(x)
        merged, size = merging_block(block, x, None, r=4)
    assert merged.shape == (1, 16, 16) and size.sum() == 20
    assert sorted(size.flatten().tolist()) == [1.0] * 12 + [2.0] * 4
    distance = torch.cdist(merged[0], unmerged[0]).min(dim=1).values
    assert distance.max() < 1e-5
    # proportional attention matters: the same merge without the log-size bias does change the outputs
    with torch.no_grad():
        plain, _ = merging_block(block, merged, None, r=1)
        weighted, _ = merging_block(block, merged, size, r=1)
    assert not torch.allclose(plain, weighted, atol=1e-4)


def test_matching_merges_the_most_similar_pairs_and_protects_the_prefix():
    metric = torch.randn(1, 9, 8)
    metric[0, 3] = metric[0, 6] * 2.0  # A token 3 ~ B token 6 (cosine 1)
    merge = bipartite_soft_matching(metric, r=1, protected=1)  # token 0 (class) stays out
    x = torch.arange(9.0).reshape(1, 9, 1)
    out = merge(x)
    assert out.shape == (1, 8, 1) and out[0, 0, 0] == 0.0
    assert sorted(out.flatten().tolist()) == sorted([0, 1, 2, 4, 5, 7, 8] + [3 + 6])
    merged, size = merge_wavg(merge, torch.randn(1, 9, 4))
    assert size.sum() == 9 and size.max() == 2
    with pytest.raises(ValueError, match="got r=5"):
        bipartite_soft_matching(metric, r=5, protected=1)


def test_tokens_shrink_by_r_per_block_and_sizes_add_up():
    model = vit(depth=3)  # 36 patches + class token
    tokens, size = apply_tome(model, 5).forward_features(torch.randn(2, 1, 24, 24))
    assert tokens.shape == (2, 37 - 3 * 5, 16)
    assert torch.equal(size.sum(dim=1), torch.full((2, 1), 37.0)) and (size[:, 0] == 1).all()
    tokens, _ = apply_tome(model, 50).forward_features(torch.randn(1, 1, 24, 24))  # capped at half the patches:
    assert tokens.shape[1] == 1 + 5  # 36 -> 18 -> 9 -> 5 patches


def test_shares_the_models_weights():
    model = vit(class_token=False, pool="mean", depth=2)
    fast = apply_tome(model, 4)
    assert set(fast.state_dict()) == {f"model.{k}" for k in model.state_dict()}
    images = torch.randn(2, 1, 24, 24)
    with torch.no_grad():
        before = fast(images)
        model.head.bias.add_(1.0)
        assert torch.allclose(fast(images), before + 1.0, atol=1e-5)


@pytest.mark.parametrize(
    "model, match",
    [
        (vit(pos_embed="rope"), "rotary"),
        (vit(block="postnorm"), "pre-norm blocks"),
        (vit(attention="lsa"), "kind 'lsa'"),
    ],
)
def test_models_it_cannot_rewrite_are_refused(model, match):
    with pytest.raises(ValueError, match=match):
        apply_tome(model, 2)


def test_a_schedule_merges_per_block():
    assert front_loaded(8, 12) == [15, 14, 12, 11, 10, 9, 7, 6, 5, 4, 2, 1] and sum(front_loaded(8, 12)) == 96
    model = vit(depth=3)
    tokens, size = apply_tome(model, [6, 0, 3]).forward_features(torch.randn(1, 1, 24, 24))
    assert tokens.shape[1] == 37 - 9 and size.sum() == 37


@pytest.mark.parametrize("r", [-1, 1.5, [1, 2]])
def test_bad_r_is_refused(r):
    with pytest.raises(ValueError, match="non-negative integer"):
        apply_tome(vit(), r)


@pytest.mark.parametrize("reg_tokens", [0, 2])
def test_class_token_readout_of_the_merged_model(reg_tokens):
    model = VisionTransformer(
        ViTConfig(img_size=32, patch_size=4, embed_dim=32, depth=3, num_heads=4, num_classes=5, reg_tokens=reg_tokens)
    ).eval()
    merged = apply_tome(model, 6)
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        tokens, _ = merged.forward_features(images)
        assert tokens.shape[1] == 1 + reg_tokens + 64 - 3 * 6
        torch.testing.assert_close(merged(images), model.forward_head(tokens))
        assert merged.forward_features(images, readout=1)[0].shape == (2, 1, 32)


@pytest.mark.parametrize("readout", [None, 1])
def test_the_merged_encoder_is_merging_blocks_by_hand(readout):
    model = vit(reg_tokens=1)
    schedule = [5, 0, 3, 2]
    images = torch.randn(2, 1, 24, 24)
    with torch.no_grad():
        x, _ = model.embed(images)
        size = None
        for i, (block, r) in enumerate(zip(model.blocks, schedule)):
            x, size = merging_block(block, x, size, r, protected=2, queries=readout if i == 3 else None)
        tokens, got_size = apply_tome(model, schedule).forward_features(images, readout)
    torch.testing.assert_close(tokens, model.norm(x), rtol=0, atol=0)
    torch.testing.assert_close(got_size, size, rtol=0, atol=0)


def test_merged_mean_pool_weighs_tokens_by_size():
    model = vit(class_token=False, pool="mean", fc_norm=True)
    merged = apply_tome(model, 6)
    images = torch.randn(2, 1, 24, 24)
    with torch.no_grad():
        tokens, size = merged.forward_features(images)
        pooled = (tokens * size).sum(dim=1) / 36  # sizes add up to 36 patches
        torch.testing.assert_close(merged(images), model.head(model.fc_norm(pooled)))


def test_a_distilled_student_merges_behind_its_distillation_token():
    model = vit(reg_tokens=1, distill_token=True)
    images = torch.randn(2, 1, 24, 24)
    with torch.no_grad():
        assert torch.equal(apply_tome(model, 0)(images), model(images))
        tokens, size = apply_tome(model, 4).forward_features(images)
        assert tokens.shape[1] == 3 + 36 - 4 * 4 and (size[:, :3] == 1).all()
        cls, dist = apply_tome(model, 4).train()(images)
    assert cls.shape == dist.shape == (2, 5)
