"""BatchAugment: each step checked against an oracle or a property; determinism; presets."""

import pytest
import torch
import torch.nn.functional as F

from vitlab.data import AugmentConfig, BatchAugment


def augment(**config):
    return BatchAugment(AugmentConfig(**config), num_classes=10, generator_seed=0)


def test_random_crop_is_a_shifted_window_of_the_padded_image():
    pad = 2
    image = (torch.arange(2 * 5 * 6, dtype=torch.float32).view(1, 2, 5, 6) + 1) / 100
    batch = image.expand(64, -1, -1, -1)
    out, labels = augment(crop_padding=pad)(batch, torch.zeros(64, dtype=torch.long))
    padded = F.pad(image[0], (pad,) * 4)
    windows = {(dy, dx): padded[:, dy : dy + 5, dx : dx + 6] for dy in range(2 * pad + 1) for dx in range(2 * pad + 1)}
    found = [next(k for k, w in windows.items() if torch.equal(w, o)) for o in out]
    assert out.shape == batch.shape and len(set(found)) > 10  # per-sample offsets, many of the 25
    # a hand-checked case: offset (0, 0) puts the top-left pixel at (2, 2), zeros above and left
    zero_shift = windows[(0, 0)]
    assert zero_shift[0, 2, 2] == image[0, 0, 0, 0] and zero_shift[:, :2].abs().sum() == 0


def test_flip_per_sample():
    images = torch.rand(200, 3, 4, 4)
    out, _ = augment(hflip=True)(images, torch.zeros(200, dtype=torch.long))
    same = (out == images).flatten(1).all(1)
    flipped = (out == images.flip(-1)).flatten(1).all(1)
    assert (same ^ flipped).all() and 60 < int(flipped.sum()) < 140


def test_erasing_fills_one_rectangle_with_noise_in_range():
    images = torch.full((100, 2, 16, 16), 0.5)
    out, _ = augment(erasing=1.0)(images, torch.zeros(100, dtype=torch.long))
    changed = out != images
    assert (changed[:, 0] == changed[:, 1]).all() and 0 <= float(out.min()) and float(out.max()) <= 1
    for mask in changed[:, 0]:
        rows, cols = mask.any(1).nonzero()[:, 0], mask.any(0).nonzero()[:, 0]
        box = torch.zeros_like(mask)
        box[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1] = True
        assert torch.equal(mask, box) and 0.01 < mask.float().mean() < 0.4
    half, _ = augment(erasing=0.5)(images, torch.zeros(100, dtype=torch.long))
    assert 25 < int((half != images).flatten(1).any(1).sum()) < 75


def test_mixup_mixes_images_and_targets_with_one_lambda():
    images, labels = torch.rand(8, 1, 6, 6), torch.arange(8)
    out, targets = augment(mixup_alpha=1.0)(images, labels)
    lam = float(targets[0, 0])
    expected = F.one_hot(labels, 10) * lam + F.one_hot(labels.roll(1), 10) * (1 - lam)
    torch.testing.assert_close(targets, expected)
    torch.testing.assert_close(out, images * lam + images.roll(1, 0) * (1 - lam))


def test_cutmix_pastes_a_box_whose_area_matches_the_targets():
    images, labels = torch.rand(8, 3, 10, 10), torch.arange(8)
    out, targets = augment(cutmix_alpha=1.0, switch_prob=1.0)(images, labels)
    from_self = (out == images).all(1)
    from_other = (out == images.roll(1, 0)).all(1)
    assert (from_self | from_other).all()
    torch.testing.assert_close(targets[torch.arange(8), labels], from_self.float().mean((1, 2)))
    torch.testing.assert_close(targets.sum(1), torch.ones(8))


@pytest.mark.parametrize("channels", [1, 3])
def test_strong_preset_shapes_range_soft_targets_and_determinism(channels):
    config = AugmentConfig.preset("strong", image_size=12)
    images, labels = torch.rand(32, channels, 12, 12), torch.randint(0, 10, (32,))
    state = torch.get_rng_state()
    first, second = BatchAugment(config, 10, generator_seed=3), BatchAugment(config, 10, generator_seed=3)
    for _ in range(3):
        out, targets = first(images, labels)
        again, targets_again = second(images, labels)
        assert torch.equal(out, again) and torch.equal(targets, targets_again)
        assert out.shape == images.shape and targets.shape == (32, 10)
        assert 0 <= float(out.min()) and float(out.max()) <= 1
        torch.testing.assert_close(targets.sum(1), torch.ones(32))
    assert torch.equal(torch.get_rng_state(), state)  # the global generator is untouched
    other, _ = BatchAugment(config, 10, generator_seed=4)(images, labels)
    assert not torch.equal(other, first(images, labels)[0])


@pytest.mark.parametrize("auto", ["randaugment", "trivialaugment"])
def test_auto_augment_varies_by_group(auto):
    image = torch.rand(1, 3, 16, 16)
    out, _ = augment(auto=auto, auto_group=4)(image.expand(16, -1, -1, -1), torch.zeros(16, dtype=torch.long))
    groups = out.view(4, 4, 3, 16, 16)
    assert (groups == groups[:, :1]).all()  # one draw of ops per group
    assert len({g[0].numpy().tobytes() for g in groups}) > 1  # different draws across groups
    torch.testing.assert_close(out * 255, (out * 255).round())  # ran on uint8


def test_mix_prob_zero_gives_one_hot_and_no_mixing_gives_labels():
    images, labels = torch.rand(4, 1, 5, 5), torch.tensor([1, 2, 3, 4])
    out, targets = augment(mixup_alpha=1.0, mix_prob=0.0)(images, labels)
    assert torch.equal(out, images) and torch.equal(targets, F.one_hot(labels, 10).float())
    out, targets = augment(crop_padding=1)(images, labels)
    assert targets is labels


def test_presets_respect_hflip_hint_and_validation():
    assert AugmentConfig.preset("none") == AugmentConfig()
    light = AugmentConfig.preset("light", image_size=8, hflip_ok=False)
    assert (light.crop_padding, light.hflip, light.mixing) == (1, False, False)
    strong = AugmentConfig.preset("strong", image_size=32, erasing=0.0)
    assert (strong.crop_padding, strong.hflip, strong.auto, strong.erasing) == (4, True, "randaugment", 0.0)
    assert strong.mixing
    with pytest.raises(ValueError, match="unknown augmentation preset 'heavy'"):
        AugmentConfig.preset("heavy")
    with pytest.raises(ValueError, match="auto must be one of"):
        AugmentConfig(auto="autoaugment")
    with pytest.raises(ValueError, match="erasing is a probability"):
        AugmentConfig(erasing=1.5)
