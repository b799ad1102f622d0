"""The shapes dataset and the users' own-data readers."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.data import load_dense_dataset
from vitlab.data.dense import load_coco_boxes, load_mask_folder
from vitlab.data.shapes import generate_shapes


def test_shapes_is_seeded_and_consistent():
    a, b = generate_shapes(6, 32, seed=1), generate_shapes(6, 32, seed=1)
    assert torch.equal(a.images, b.images) and torch.equal(a.masks, b.masks)
    assert not torch.equal(a.images, generate_shapes(6, 32, seed=2).images)
    assert a.images.shape == (6, 3, 32, 32) and 0 <= a.images.min() and a.images.max() <= 1
    for mask, boxes, labels in zip(a.masks, a.boxes, a.labels):
        assert len(boxes) == len(labels) >= 1
        for (x0, y0, x1, y1), lab in zip(boxes.long().tolist(), labels.tolist()):
            assert (mask[y0:y1, x0:x1] == lab + 1).any()  # each box holds its class


def test_rows_and_splits():
    splits = load_dense_dataset("shapes", count=20, image_size=32, rows=5)
    assert len(splits.train) == 5 and len(splits.val) == 3 and len(splits.test) == 3
    with pytest.raises(ValueError, match="unknown dense dataset"):
        load_dense_dataset("nope")


def test_mask_folder_and_coco_readers(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "masks").mkdir()
    images = []
    for i in range(10):
        mask = np.zeros((16, 16), np.uint8)
        mask[2:6, 3:9] = 1 + i % 2
        Image.fromarray(np.full((16, 16, 3), 40 * (i % 5), np.uint8)).save(tmp_path / "images" / f"{i}.png")
        Image.fromarray(mask).save(tmp_path / "masks" / f"{i}.png")
        images.append({"id": i, "file_name": f"images/{i}.png"})
    splits = load_mask_folder(tmp_path, image_size=16)
    data = splits.train
    assert data.classes == ("class1", "class2") and data.masks.shape[1:] == (16, 16)
    assert data.boxes[0].tolist() == [[3.0, 2.0, 9.0, 6.0]]
    anns = [{"id": i, "image_id": i, "category_id": 7, "bbox": [3, 2, 6, 4]} for i in range(10)]
    (tmp_path / "ann.json").write_text(
        json.dumps({"images": images, "annotations": anns, "categories": [{"id": 7, "name": "thing"}]})
    )
    coco = load_coco_boxes(tmp_path / "ann.json", image_size=32).train
    assert coco.masks is None and coco.classes == ("thing",)
    assert coco.boxes[0].tolist() == [[6.0, 4.0, 18.0, 12.0]] and coco.labels[0].tolist() == [0]
