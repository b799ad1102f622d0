"""Heads and backbone maps: shapes, cross-attention weights, the query head's semantic scores."""
import pytest
import torch

from vitlab.dense.decoder import TransformerDecoder
from vitlab.dense.heads import semantic_from_queries
from vitlab.dense.model import DenseConfig, DenseModel
from vitlab.models.vit import VisionTransformer

TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, decoder_width=32, num_queries=6)


def test_forward_intermediates_returns_maps_of_the_patch_grid():
    vit = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=0)
    x = torch.rand(2, 3, 32, 32)
    maps = vit.forward_intermediates(x, [0, -1])
    assert [tuple(m.shape) for m in maps] == [(2, 32, 4, 4)] * 2
    tokens = vit.forward_features(x)[:, vit.num_prefix_tokens:]  # last map == final normed patch tokens
    torch.testing.assert_close(maps[1].flatten(2).transpose(1, 2), tokens)
    with pytest.raises(ValueError, match="out of range"):
        vit.forward_intermediates(x, [3])


@pytest.mark.parametrize("patch", [4, 8])
def test_upsampled_per_patch_logits_have_the_input_size(patch):
    model = DenseModel(DenseConfig(head="linear", **{**TINY, "patch_size": patch}))
    assert model(torch.rand(2, 3, 32, 32))["logits"].shape == (2, 5, 32, 32)


def test_decoder_head_logits_have_the_input_size_and_reject_odd_patches():
    model = DenseModel(DenseConfig(head="decoder", **TINY))
    assert model(torch.rand(2, 3, 32, 32))["logits"].shape == (2, 5, 32, 32)
    with pytest.raises(ValueError, match="power of 2"):
        DenseModel(DenseConfig(head="decoder", **{**TINY, "img_size": 36, "patch_size": 6}))


def test_cross_attention_weights_shape_and_rows_sum_to_one():
    dec = TransformerDecoder(dim=32, depth=2, num_heads=4, num_queries=7)
    weights = dec.cross_attention_weights(torch.randn(3, 20, 32))
    assert len(weights) == 2
    for w in weights:
        assert w.shape == (3, 4, 7, 20)
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, 7))
        assert (w >= 0).all()


def test_query_and_detr_heads_output_shapes():
    seg = DenseModel(DenseConfig(head="queries", **TINY))
    out = seg(torch.rand(2, 3, 32, 32))
    assert out["logits"].shape == (2, 6, 6) and out["masks"].shape == (2, 6, 32, 32) and len(out["aux"]) == 1
    assert semantic_from_queries(out["logits"], out["masks"]).shape == (2, 5, 32, 32)
    det = DenseModel(DenseConfig(task="detect", head="detr", **TINY))
    out = det(torch.rand(2, 3, 32, 32))
    assert out["logits"].shape == (2, 6, 5) and out["boxes"].shape == (2, 6, 4)
    assert ((out["boxes"] > 0) & (out["boxes"] < 1)).all()


def test_wrong_head_for_task_is_a_clear_error():
    with pytest.raises(ValueError, match="does not do detect"):
        DenseConfig(task="detect", head="linear")
