"""Heads and backbone maps: shapes, cross-attention weights, the query head's semantic scores."""

import math

import pytest
import torch

from vitlab.models.dense.decoder import TransformerDecoder
from vitlab.models.dense.heads import semantic_from_queries
from vitlab.models.dense.model import DenseConfig, DenseModel
from vitlab.models.vit import VisionTransformer

TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, decoder_width=32, num_queries=6)


def test_forward_intermediates_returns_maps_of_the_patch_grid():
    vit = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=0)
    x = torch.rand(2, 3, 32, 32)
    maps = vit.forward_intermediates(x, [0, -1], norm=True, intermediates_only=True)
    assert [tuple(m.shape) for m in maps] == [(2, 32, 4, 4)] * 2
    tokens = vit.forward_features(x)[:, vit.num_prefix_tokens :]  # last map == final normed patch tokens
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
    assert out["logits"].shape == (2, 6, 6) and out["masks"].shape == (2, 6, 32, 32)
    assert len(out["aux"]) == seg.config.decoder_depth - 1
    assert semantic_from_queries(out["logits"], out["masks"]).shape == (2, 5, 32, 32)
    det = DenseModel(DenseConfig(task="detect", head="detr", detr_queries="learned", **TINY))
    out = det(torch.rand(2, 3, 32, 32))
    assert out["logits"].shape == (2, 6, 5) and out["boxes"].shape == (2, 6, 4)
    assert ((out["boxes"] > 0) & (out["boxes"] < 1)).all()
    det = DenseModel(DenseConfig(task="detect", head="detr", detr_queries="tokens", **TINY))
    out = det(torch.rand(2, 3, 32, 32))  # a proposal per token of the 4 x 4 grid, 6 of them become queries
    assert out["logits"].shape == (2, 6, 5) and out["boxes"].shape == (2, 6, 4)
    assert out["proposals"]["logits"].shape == (2, 16, 5) and out["proposals"]["boxes"].shape == (2, 16, 4)
    with pytest.raises(ValueError, match="learned' or 'tokens"):
        DenseModel(DenseConfig(task="detect", head="detr", detr_queries="nope", **TINY))


def test_wrong_head_for_task_is_a_clear_error():
    with pytest.raises(ValueError, match="does not do detect"):
        DenseConfig(task="detect", head="linear")


def test_sine_position_embedding_of_a_grid_is_distinct_per_cell():
    from vitlab.models.dense.decoder import sine_pos_2d

    pos = sine_pos_2d(4, 3, 16)
    assert pos.shape == (1, 12, 16)
    assert torch.cdist(pos[0], pos[0]).add(torch.eye(12)).min() > 1e-3  # no two cells share an embedding
    with pytest.raises(ValueError, match="divisible by 4"):
        sine_pos_2d(2, 2, 10)


def test_token_positions_reach_the_keys_only():
    from vitlab.models.dense.decoder import CrossAttention

    attn = CrossAttention(16, num_heads=2)
    q, tokens = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    torch.testing.assert_close(attn(q, tokens), attn._attend(q, tokens, False, torch.zeros(1, 5, 16))[0])
    pos = torch.randn(1, 5, 16)
    out, w = attn._attend(q, tokens, True, pos)
    assert not torch.allclose(out, attn(q, tokens))  # the positions move the attention ...
    v = attn.kv(tokens)[..., 16:].view(2, 5, 2, 8).transpose(1, 2)  # ... but the values are the tokens' own
    torch.testing.assert_close(out, attn.proj((w @ v).transpose(1, 2).reshape(2, 3, 16)))


def test_detr_boxes_start_at_the_anchor_grid_and_each_layer_refines_them():
    det = DenseModel(
        DenseConfig(
            task="detect", head="detr", detr_queries="learned", **{**TINY, "num_queries": 4, "decoder_depth": 3}
        )
    )
    out = det(torch.rand(2, 3, 32, 32))
    assert len(out["aux"]) == 2
    centres = torch.tensor([[0.25, 0.25], [0.75, 0.25], [0.25, 0.75], [0.75, 0.75]])
    torch.testing.assert_close(out["aux"][0]["boxes"][..., :2], centres.expand(2, -1, -1))  # zero-initialised deltas
    torch.nn.init.normal_(det.head.predict.box_out.weight, std=0.1)
    out = det(torch.rand(2, 3, 32, 32))
    first, second = out["aux"][0]["boxes"], out["aux"][1]["boxes"]
    assert not torch.allclose(first, second)
    first.sum().backward()  # the first layer's boxes do not depend on the later layers
    assert det.head.decoder.layers[2].mlp.fc1.weight.grad is None


def test_token_queries_start_from_their_proposals_which_start_centred_on_their_cells():
    det = DenseModel(DenseConfig(task="detect", head="detr", detr_queries="tokens", **{**TINY, "patch_size": 16}))
    out = det(torch.rand(3, 3, 32, 32))
    proposals = out["proposals"]["boxes"]  # zero-initialised deltas: the anchors
    expected = torch.tensor([[0.25, 0.25], [0.75, 0.25], [0.25, 0.75], [0.75, 0.75]])  # row-major 2 x 2 grid
    torch.testing.assert_close(proposals[..., :2], expected.expand(3, -1, -1))
    torch.testing.assert_close(proposals[..., 2:], torch.full((3, 4, 2), det.head.anchor_size))
    assert out["proposals"]["logits"].shape == out["logits"].shape
    torch.nn.init.normal_(det.head.propose.box_out.weight, std=0.1)
    out = det(torch.rand(3, 3, 32, 32))
    start, proposals = out["aux"][0]["boxes"], out["proposals"]["boxes"]  # the decoder starts at proposals:
    assert torch.cdist(start, proposals).min(-1).values.max() < 1e-6  # each query's box is one of them
    out["aux"][0]["boxes"].sum().backward()  # from the detached proposal: no gradient into the proposer
    assert det.head.propose.box_out.weight.grad is None


def test_query_selection_keeps_one_of_each_group_of_near_identical_proposals():
    from vitlab.models.dense.heads import DETRHead

    head = DETRHead(16, num_classes=2, width=16, num_queries=3, queries="tokens", query_nms=0.7)
    boxes = torch.tensor(
        [
            [
                [0.3, 0.3, 0.2, 0.2],
                [0.3, 0.3, 0.2, 0.21],
                [0.31, 0.3, 0.2, 0.2],
                [0.7, 0.7, 0.2, 0.2],
                [0.1, 0.9, 0.1, 0.1],
            ]
        ]
    )
    scores = torch.tensor([0.9, 0.85, 0.8, 0.6, 0.3])  # the three at (0.3, 0.3) score best
    logits = torch.stack([scores.logit(), torch.zeros(5), torch.zeros(5)], -1)[None]  # class 0 vs no-object
    assert head.select_queries(logits, boxes).tolist() == [[0, 3, 4]]  # one of the group, then the distinct ones
    head.num_queries = 4  # only 3 survive NMS: the best suppressed one fills the last place
    assert head.select_queries(logits, boxes).tolist() == [[0, 3, 4, 1]]
    head.query_nms = 1.0  # no NMS: simply the best-scored
    assert head.select_queries(logits, boxes).tolist() == [[0, 1, 2, 3]]


def test_box_relations_are_zero_for_a_box_and_its_duplicate_and_grow_with_distance():
    from vitlab.models.dense.heads import box_relations

    boxes = torch.tensor([[[0.3, 0.3, 0.2, 0.1], [0.3, 0.3, 0.2, 0.1], [0.5, 0.3, 0.4, 0.1], [0.9, 0.3, 0.2, 0.1]]])
    rel = box_relations(boxes)
    assert rel.shape == (1, 4, 4, 4)
    torch.testing.assert_close(rel[0, 0, 1], torch.zeros(4))  # duplicates: nothing tells them apart
    torch.testing.assert_close(rel[0, 0, 2], torch.tensor([math.log(2.0), 0.0, math.log(0.5), 0.0]))
    assert rel[0, 0, 3, 0] > rel[0, 0, 2, 0]  # farther along x


def test_the_relation_bias_reaches_the_queries_self_attention():
    det = DenseModel(DenseConfig(task="detect", head="detr", detr_queries="learned", **TINY))
    images = torch.rand(2, 3, 32, 32)
    before = det(images)["logits"]  # the bias starts at zero ...
    torch.nn.init.normal_(det.head.relation[2].weight, std=1.0)
    after = det(images)["logits"]
    assert not torch.allclose(before, after)  # ... and, once learned, changes what the queries decode
    after.sum().backward()
    assert det.head.relation[0].weight.grad.abs().sum() > 0
