"""A perfect prediction: detection loss ~0 and mAP 1; segmentation metrics on known cases."""

import pytest
import torch
from torchvision.ops import box_convert

from vitlab.tasks.dense.losses import DetectionLoss, repeat_targets
from vitlab.tasks.dense.metrics import box_map, segmentation_confusion, segmentation_report

BOXES = [torch.tensor([[4.0, 4.0, 20.0, 30.0], [30.0, 10.0, 60.0, 22.0]]), torch.tensor([[10.0, 40.0, 50.0, 60.0]])]
LABELS = [torch.tensor([1, 3]), torch.tensor([0])]


def perfect_outputs(num_queries: int = 5, num_classes: int = 4, big: float = 30.0) -> tuple[dict, list[dict]]:
    """Queries 0..T-1 predict the targets exactly with logits +-big; the others predict no-object.

    Cross-entropy is exactly zero only in the limit of infinite logits, so "zero" here is < 1e-6."""
    targets, logits, boxes = [], [], []
    for b, lab in zip(BOXES, LABELS):
        cxcywh = box_convert(b / 64, "xyxy", "cxcywh")
        targets.append({"labels": lab, "boxes": cxcywh})
        lg = torch.full((num_queries, num_classes + 1), -big)
        lg[torch.arange(len(lab)), lab] = big
        lg[len(lab) :, -1] = big
        bx = torch.full((num_queries, 4), 0.5)
        bx[: len(lab)] = cxcywh
        logits.append(lg)
        boxes.append(bx)
    out = {"logits": torch.stack(logits), "boxes": torch.stack(boxes)}
    return {**out, "aux": [dict(out)]}, targets


def test_perfect_prediction_has_near_zero_detection_loss():
    outputs, targets = perfect_outputs()
    loss = DetectionLoss()(outputs, targets)
    assert float(loss["loss"]) < 1e-6
    outputs["boxes"][0, 0, 0] += 0.1  # one box off: the loss must notice
    assert float(DetectionLoss()(outputs, targets)["loss"]) > 0.1


def test_one_to_many_targets_repeat_as_far_as_the_queries_allow():
    targets = [{"labels": lab, "boxes": box_convert(b / 64, "xyxy", "cxcywh")} for b, lab in zip(BOXES, LABELS)]
    many = repeat_targets(targets, 3, num_queries=5)
    assert [len(t["labels"]) for t in many] == [4, 3]  # image 0: 2 targets x 3 copies > 5 queries, so 2 copies
    assert many[1]["labels"].tolist() == [0, 0, 0]
    torch.testing.assert_close(many[0]["boxes"], targets[0]["boxes"].repeat(2, 1))


def test_proposals_learn_each_target_several_times():
    outputs, targets = perfect_outputs(num_queries=6)
    one_each = {"logits": outputs["logits"].clone(), "boxes": outputs["boxes"].clone()}
    loss = DetectionLoss()  # one_to_many = 4: 2 copies for image 0 (2 targets, 6 queries), 4 for image 1
    base = float(loss({**outputs, "proposals": one_each}, targets)["loss"])
    assert base > 1.0  # one proposal per target is not enough: the copies are matched to wrong ones
    for i, (lab, t) in enumerate(zip(LABELS, targets)):  # now every copy has a proposal that predicts it
        k = min(4, 6 // len(lab))
        one_each["logits"][i] = -30.0
        one_each["logits"][i, :, -1] = 30.0
        one_each["logits"][i, torch.arange(k * len(lab)), lab.repeat(k)] = 30.0
        one_each["logits"][i, : k * len(lab), -1] = -30.0
        one_each["boxes"][i, : k * len(lab)] = t["boxes"].repeat(k, 1)
    assert float(loss({**outputs, "proposals": one_each}, targets)["loss"]) < 1e-6


def test_perfect_prediction_has_map_one_and_a_wrong_one_less():
    targets = [{"boxes": b, "labels": lab} for b, lab in zip(BOXES, LABELS)]
    preds = [{"boxes": b, "scores": torch.ones(len(b)), "labels": lab} for b, lab in zip(BOXES, LABELS)]
    assert box_map(preds, targets, 4) == {"map": pytest.approx(1.0), "map50": pytest.approx(1.0)}
    wrong = [{**p, "labels": (p["labels"] + 1) % 4} for p in preds]
    assert box_map(wrong, targets, 4)["map50"] < 0.5


def test_segmentation_report_on_a_known_confusion():
    target = torch.tensor([[[0, 0], [1, 1]]])
    pred = torch.tensor([[[0, 1], [1, 1]]])
    report = segmentation_report(segmentation_confusion(pred, target, 3))
    assert report["pixel_acc"] == pytest.approx(0.75)
    assert report["iou"] == [pytest.approx(0.5), pytest.approx(2 / 3), None]
    assert report["mean_iou"] == pytest.approx((0.5 + 2 / 3) / 2)


def test_boundary_band_marks_pixels_next_to_a_class_change():
    from vitlab.tasks.dense.metrics import boundary_accuracy, boundary_band

    target = torch.zeros(1, 6, 6, dtype=torch.long)
    target[:, :, 3:] = 1
    band = boundary_band(target)
    assert band[0].any(0).tolist() == [False, False, True, True, False, False]
    blocky = target.clone()
    blocky[:, :, 2] = 1  # wrong only on the boundary column 2
    assert boundary_accuracy(blocky, target) == pytest.approx(0.5)
