"""Robustness probes: which patches are masked, how a ViT drops their tokens, centre crops, and the
accuracies ``robustness`` reports against the model's own predictions."""

import pytest
import torch

from vitlab.data import ImageDataset
from vitlab.data.preprocess import Statistics
from vitlab.explain.robustness import (
    Probes,
    centre_crop,
    drops_tokens,
    keep_indices,
    probe_key,
    robustness,
    zero_patches,
)
from vitlab.models import build_registered

DIGITS = {"num_classes": 10, "in_chans": 1, "img_size": (8, 8)}


def own_predictions(model, images):
    """A dataset labelled with ``model``'s own clean predictions (its clean accuracy is exactly 1), its
    weights first shaken so that the predictions depend on the input."""
    torch.manual_seed(0)
    with torch.no_grad():
        for weight in model.parameters():
            weight.add_(0.5 * torch.randn_like(weight))
        labels = model.eval()(images).argmax(-1)
    return ImageDataset(images, labels, [str(c) for c in range(10)])


@pytest.mark.parametrize(
    "count,patches,fraction,kept", [(5, 16, 0.25, 12), (3, 4, 0.5, 2), (2, 16, 0.0, 16), (2, 4, 0.9, 1)]
)
def test_keep_indices_are_sorted_distinct_and_the_same_for_every_model(count, patches, fraction, kept):
    keep = keep_indices(count, patches, fraction)
    assert keep.shape == (count, kept)
    assert all(row.unique().numel() == kept and row.tolist() == sorted(row.tolist()) for row in keep)
    assert int(keep.min()) >= 0 and int(keep.max()) < patches
    assert torch.equal(keep, keep_indices(count, patches, fraction))  # fixed seed
    assert not torch.equal(keep_indices(64, 16, 0.5), keep_indices(64, 16, 0.5, seed=1))


def test_zero_patches_zeroes_exactly_the_removed_patches():
    images = torch.rand(3, 2, 8, 8) + 1  # no zero pixel of its own
    keep = keep_indices(3, 16, 0.5)
    out = zero_patches(images, keep, 2)
    for b in range(3):
        for index in range(16):
            r, c = divmod(index, 4)
            block = out[b, :, 2 * r : 2 * r + 2, 2 * c : 2 * c + 2]
            if index in keep[b].tolist():
                assert torch.equal(block, images[b, :, 2 * r : 2 * r + 2, 2 * c : 2 * c + 2])
            else:
                assert not block.any()
    # a padded grid: 28 pixels in patches of 8 -> a 4x4 grid whose last row and column are clipped
    assert zero_patches(torch.ones(1, 1, 28, 28), torch.arange(15)[None], 8)[0, 0, 24:, 24:].sum() == 0


def test_centre_crop_keeps_the_size_and_the_centre():
    images = torch.rand(2, 1, 8, 8)
    assert torch.allclose(centre_crop(images, 1.0), images)
    ramp = torch.arange(8.0).repeat(8, 1)[None, None]  # columns 0..7
    cropped = centre_crop(ramp, 0.5)  # columns 2..5 stretched over 8
    assert cropped.shape == ramp.shape and 2 <= float(cropped.min()) and float(cropped.max()) <= 5


def test_a_vit_drops_the_masked_tokens_before_its_blocks():
    model = build_registered("vit-digits", **DIGITS, patch_size=2, pool="token", class_token=True)
    seen = []
    model.blocks[0].register_forward_pre_hook(lambda module, args: seen.append(args[0].shape[1]))
    data = own_predictions(model, torch.rand(16, 1, 8, 8))  # one scoring batch
    seen.clear()
    entries = robustness(model, data, Statistics.unit(1), [2], Probes(masks=(0.0, 0.25, 0.5), crops=()))
    # clean (16 + class token), then per share: dropped (1 + kept tokens), zeroed (all 17)
    assert seen == [17, 17, 17, 1 + 12, 17, 1 + 8, 17]
    (entry,) = entries
    assert entry["clean"] == entry[probe_key("drop", 0.0)] == entry[probe_key("zero", 0.0)] == 1.0
    assert entry[probe_key("drop", 0.5)] < 1.0  # dropping half the tokens changes some predictions


def test_models_that_cannot_drop_tokens_are_zeroed_only():
    cnn = build_registered("cnn-digits", **DIGITS)
    rel = build_registered("vit-digits", **DIGITS, patch_size=2, pos_embed="none", rel_pos="per_block")
    assert not drops_tokens(cnn) and not drops_tokens(rel) and drops_tokens(build_registered("vit-digits", **DIGITS))
    images = torch.rand(16, 1, 8, 8)
    for model in (cnn, rel):
        entries = robustness(
            model, own_predictions(model, images), Statistics.unit(1), [2, 4], Probes((0.0, 0.5), (0.75,))
        )
        assert [e["patch"] for e in entries] == [2, 4]
        for entry in entries:
            assert entry["drop_0"] is None and entry["drop_0.5"] is None
            assert entry["clean"] == entry["zero_0"] == 1.0 and 0 <= entry["zero_0.5"] <= 1
            assert entry["crop_0.75"] == entries[0]["crop_0.75"]  # a crop knows no patch grid
