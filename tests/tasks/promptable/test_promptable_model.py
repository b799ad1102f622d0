"""The promptable model: prompt encoding (tokens and the dense prompt), the two-way decoder, the loss
on the best of K candidates, IoU targets, prompt sampling, instance masks, and the checkpoint round trip."""

import math

import pytest
import torch

from vitlab.data.shapes import generate_shapes
from vitlab.errors import CheckpointError, ConfigError
from vitlab.models import PromptableConfig, PromptableModel, build_registered, list_models
from vitlab.models.promptable import (
    BOX_BOTTOM_RIGHT,
    BOX_TOP_LEFT,
    FOREGROUND,
    PADDING,
    MaskDecoder,
    PromptEncoder,
    TwoWayTransformer,
    box_prompt,
)
from vitlab.runs import DataConfig, load_checkpoint, save_checkpoint
from vitlab.tasks.promptable.losses import mask_iou, promptable_loss
from vitlab.tasks.promptable.predict import prompt_tensors, segment
from vitlab.tasks.promptable.sampling import centre_points, jitter_boxes, training_prompts, uniform_points

TINY = dict(
    img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2, decoder_dim=16, decoder_depth=1, decoder_heads=2
)


def test_prompt_tokens_have_their_shape_and_depend_on_position_and_label():
    encoder = PromptEncoder(16, img_size=32)
    points = torch.tensor([[[3.0, 4.0], [20.0, 9.0], [0.0, 0.0]]]).repeat(2, 1, 1)
    labels = torch.tensor([[FOREGROUND, 0, PADDING], [BOX_TOP_LEFT, BOX_BOTTOM_RIGHT, PADDING]])
    tokens = encoder(points, labels)
    assert tokens.shape == (2, 3, 16)
    moved = points.clone()
    moved[0, 0] = torch.tensor([10.0, 4.0])
    moved[:, 2] = torch.tensor([31.0, 31.0])
    again = encoder(moved, labels)
    assert not torch.allclose(again[0, 0], tokens[0, 0])  # the point moved: its token changed
    torch.testing.assert_close(again[0, 1:], tokens[0, 1:])  # the others did not
    torch.testing.assert_close(again[:, 2], tokens[:, 2])  # padding ignores its position
    torch.testing.assert_close(again[:, 2], encoder.not_a_point.expand(2, 16))
    relabelled = encoder(points, torch.tensor([[0, 0, PADDING], [2, 3, PADDING]]))
    torch.testing.assert_close(
        relabelled[0, 0] - tokens[0, 0], encoder.label_embed.weight[0] - encoder.label_embed.weight[1]
    )


def test_box_prompt_is_two_labelled_corners():
    points, labels = box_prompt(torch.tensor([[1.0, 2.0, 10.0, 12.0]]))
    assert points.tolist() == [[[1.0, 2.0], [10.0, 12.0]]] and labels.tolist() == [[BOX_TOP_LEFT, BOX_BOTTOM_RIGHT]]


def test_dense_prompt_depends_on_the_offset_from_each_point_and_ignores_padding():
    encoder = PromptEncoder(16, img_size=32)
    cells = torch.rand(10, 2)
    points = torch.tensor([[[3.0, 4.0], [20.0, 9.0]]])
    labels = torch.tensor([[FOREGROUND, PADDING]])
    dense = encoder.dense(points, labels, cells)
    assert dense.shape == (1, 10, 16)
    shift = torch.tensor([5.0, -2.0])
    torch.testing.assert_close(encoder.dense(points + shift, labels, cells + shift / 32), dense)
    moved_padding = points.clone()
    moved_padding[0, 1] = torch.tensor([0.0, 31.0])
    torch.testing.assert_close(encoder.dense(moved_padding, labels, cells), dense)
    alone = encoder.dense(points[:, :1], labels[:, :1], cells)
    torch.testing.assert_close(alone, dense)  # a padded prompt is its real points
    box = encoder.dense(points, torch.tensor([[BOX_TOP_LEFT, BOX_BOTTOM_RIGHT]]), cells)
    assert not torch.allclose(box, dense)  # the label decides what the offset means


def test_two_way_transformer_and_mask_decoder_shapes():
    tokens, image, pe = torch.randn(2, 6, 16), torch.randn(2, 16, 16), torch.randn(1, 16, 16)
    out_tokens, out_image = TwoWayTransformer(16, depth=2, num_heads=2)(tokens, image, pe)
    assert out_tokens.shape == (2, 6, 16) and out_image.shape == (2, 16, 16)
    decoder = MaskDecoder(16, depth=1, num_heads=2, num_masks=3, pixel_dim=8)
    out = decoder(image, (4, 4), pe, torch.randn(2, 2, 16), torch.randn(2, 8, 16, 16), (32, 32))
    assert out["masks"].shape == (2, 3, 32, 32) and out["iou"].shape == (2, 3)
    assert bool(((out["iou"] >= 0) & (out["iou"] <= 1)).all())


def test_model_decodes_one_encoding_for_many_prompts_as_its_forward_does():
    model = PromptableModel(PromptableConfig(**TINY)).eval()
    images = torch.rand(2, 3, 32, 32)
    points, labels = box_prompt(torch.tensor([[2.0, 3.0, 20.0, 25.0], [5.0, 5.0, 9.0, 30.0], [1.0, 1.0, 8.0, 8.0]]))
    image = torch.tensor([1, 0, 1])
    with torch.no_grad():
        out = model(images[image], points, labels)
        encoding = model.encode_image(images)
        again = model.decode(encoding, points, labels, image)
    assert encoding.tokens.shape == (2, 16, 4, 4) and encoding.pixels.shape == (2, 8, 16, 16)
    assert out["masks"].shape == (3, 3, 32, 32)
    torch.testing.assert_close(again["masks"], out["masks"])
    torch.testing.assert_close(again["iou"], out["iou"])


def test_the_prompt_moves_the_masks_of_an_untrained_model():
    model = PromptableModel(PromptableConfig(**TINY)).eval()
    images = torch.rand(1, 3, 32, 32).expand(2, -1, -1, -1)
    points, labels = box_prompt(torch.tensor([[2.0, 3.0, 12.0, 14.0], [18.0, 16.0, 30.0, 31.0]]))
    with torch.no_grad():
        masks = model(images, points, labels)["masks"]
    assert (masks[0] - masks[1]).abs().mean() > 1e-3 * masks.abs().mean()


def test_config_ranges_are_checked():
    with pytest.raises(ConfigError, match="patch_size 6 does not divide"):
        PromptableConfig(patch_size=6)
    with pytest.raises(ConfigError, match="mask_stride 3 does not divide"):
        PromptableConfig(mask_stride=3)
    with pytest.raises(ConfigError, match="decoder_dim"):
        PromptableConfig(decoder_dim=30, decoder_heads=4)
    with pytest.raises(ConfigError, match="num_masks"):
        PromptableConfig(num_masks=0)


def focal(logit: float, target: float) -> float:
    p = 1 / (1 + math.exp(-logit))
    p_t, alpha_t = (p, 0.25) if target else (1 - p, 0.75)
    return -alpha_t * (1 - p_t) ** 2 * math.log(p_t)


def test_loss_is_the_best_candidates_focal_and_dice_plus_iou_mse_by_hand():
    targets = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])  # (1, 2, 2)
    logits = torch.tensor(
        [
            [
                [[2.0, -1.0], [0.5, -3.0]],  # agrees with the target
                [[-2.0, 1.0], [-0.5, 3.0]],
            ]
        ]
    )  # its opposite: (1, 2, 2, 2)
    iou_pred = torch.tensor([[0.7, 0.2]])
    per = []
    for k in range(2):
        pairs = list(zip(logits[0, k].flatten().tolist(), targets[0].flatten().tolist()))
        f = sum(focal(x, t) for x, t in pairs) / 4
        p = [1 / (1 + math.exp(-x)) for x, _ in pairs]
        dice = 1 - (2 * sum(pi * t for pi, (_, t) in zip(p, pairs)) + 1) / (sum(p) + 2 + 1)
        per.append(20 * f + dice)
    actual = [1.0, 0.0]  # candidate 0 is the target exactly; 1 misses it
    expected = min(per) + ((0.7 - actual[0]) ** 2 + (0.2 - actual[1]) ** 2) / 2
    out = promptable_loss(logits, iou_pred, targets)
    assert per[0] < per[1]
    assert out["loss"].item() == pytest.approx(expected, rel=1e-5)
    assert out["mask"].item() == pytest.approx(per[0], rel=1e-5) and out["best_iou"].tolist() == [1.0]


def test_only_the_best_candidate_gets_a_mask_gradient():
    targets = (torch.rand(2, 8, 8) > 0.5).float()
    logits = torch.randn(2, 3, 8, 8, requires_grad=True)
    promptable_loss(logits, torch.zeros(2, 3), targets)["mask"].backward()
    assert logits.grad is not None
    touched = logits.grad.flatten(2).abs().sum(-1) > 0
    assert touched.sum(1).tolist() == [1, 1]


def test_mask_iou_by_hand():
    masks = torch.tensor([[[True, True], [False, False]], [[False, False], [False, False]]])
    target = torch.tensor([[[True, False], [True, False]], [[False, False], [False, False]]])
    torch.testing.assert_close(mask_iou(masks, target), torch.tensor([1 / 3, 1.0]))


def test_training_prompts_fall_inside_their_objects():
    g = torch.Generator().manual_seed(0)
    targets = torch.zeros(64, 16, 16, dtype=torch.bool)
    targets[:, 4:9, 6:12] = True
    points = uniform_points(targets, g)
    assert bool(targets[torch.arange(64), points[:, 1].long(), points[:, 0].long()].all())
    assert set(points[:, 0].long().tolist()) == set(range(6, 12))  # every column is reached
    boxes = torch.tensor([[6.0, 4.0, 12.0, 9.0]]).repeat(64, 1)
    xy, labels = training_prompts(targets, boxes, box_prob=0.5, jitter=0.1, generator=g)
    is_box = labels[:, 0] == BOX_TOP_LEFT
    assert 10 < int(is_box.sum()) < 54 and bool((labels[~is_box] == torch.tensor([FOREGROUND, PADDING])).all())
    assert (xy[is_box] - boxes[is_box].view(-1, 2, 2)).abs().max() < 3
    jittered = jitter_boxes(torch.tensor([[5.0, 5.0, 5.5, 5.5]]), 1.0, g)
    assert bool((jittered[:, 2:] >= jittered[:, :2] + 1).all())


def test_centre_point_is_farthest_from_the_boundary():
    mask = torch.zeros(1, 20, 20, dtype=torch.bool)
    mask[0, 3:10, 8:15] = True  # a 7x7 square centred at (11, 6)
    assert centre_points(mask).tolist() == [[11.0, 6.0]]


def test_shapes_instances_match_boxes_and_class_masks():
    data = generate_shapes(20, 32, seed=3)
    assert data.instances is not None and data.subset([2, 5]).instances.shape == (2, 32, 32)
    for inst, mask, boxes, labels in zip(data.instances, data.masks, data.boxes, data.labels):
        assert int(inst.max()) == len(boxes)
        for k, (box, label) in enumerate(zip(boxes, labels)):
            ys, xs = torch.nonzero(inst == k + 1, as_tuple=True)
            assert [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1] == box.long().tolist()
            assert bool((mask[inst == k + 1] == label + 1).all())
        assert bool(((inst > 0) == (mask > 0)).all())


def test_segment_takes_any_image_size_and_ranks_candidates():
    model = PromptableModel(PromptableConfig(**TINY))
    masks, ious = segment(model, torch.rand(3, 48, 40), points=[(10, 12)])
    assert masks.shape == (3, 48, 40) and masks.dtype == torch.bool and ious.shape == (3,)
    assert ious.tolist() == sorted(ious.tolist(), reverse=True)
    points, labels = prompt_tensors([(1, 2)], [0], box=(0, 0, 5, 5))
    assert points.tolist() == [[1, 2], [0, 0], [5, 5]] and labels.tolist() == [0, BOX_TOP_LEFT, BOX_BOTTOM_RIGHT]
    with pytest.raises(ConfigError, match="a point or a box"):
        segment(model, torch.rand(3, 32, 32))


def test_checkpoint_round_trip_gives_equal_outputs(tmp_path):
    model = PromptableModel(PromptableConfig(**TINY, mean=(0.4, 0.5, 0.6))).eval()
    path = save_checkpoint(
        model, tmp_path / "model.safetensors", "promptable", DataConfig((32, 32), 3, (0.0,) * 3, (1.0,) * 3, ["circle"])
    )
    loaded = load_checkpoint(path)
    assert loaded.kind == "promptable" and loaded.model.config == model.config
    images, points, labels = torch.rand(2, 3, 32, 32), torch.rand(2, 2, 2) * 32, torch.tensor([[1, -1], [2, 3]])
    with torch.no_grad():
        expected, got = model(images, points, labels), loaded.model(images, points, labels)
    for key in ("masks", "iou"):
        torch.testing.assert_close(got[key], expected[key], rtol=0, atol=0)


def test_a_checkpoint_of_the_earlier_decoder_is_refused_in_one_line(tmp_path):
    model = PromptableModel(PromptableConfig(**TINY))
    model.decoder.add_module("pixel_decoder", torch.nn.Conv2d(16, 16, 1))  # the earlier decoder's weights
    path = save_checkpoint(
        model, tmp_path / "old.safetensors", "promptable", DataConfig((32, 32), 3, (0.0,) * 3, (1.0,) * 3, ["circle"])
    )
    with pytest.raises(CheckpointError, match="earlier full-resolution mask decoder.*retrain") as err:
        load_checkpoint(path)
    assert "\n" not in str(err.value)


def test_registry_builds_the_model_from_its_config():
    assert "PromptableModel" not in list_models()
    from vitlab.models.registry import build_from_config

    model = build_from_config("PromptableConfig", PromptableConfig(**TINY).to_dict())
    assert isinstance(model, PromptableModel) and model.config == PromptableConfig(**TINY)
    with pytest.raises(ConfigError):
        build_registered("no-such-promptable")
