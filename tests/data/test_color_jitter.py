"""Colour jitter: each adjustment against torchvision's, the batched jitter against torchvision per image, and its
properties (identity at strength 0, range, per-sample factors, determinism, grey images)."""

import pytest
import torch
from torchvision.transforms.v2 import functional as TF

from vitlab.data import AugmentConfig, BatchAugment
from vitlab.data.augment import adjust_brightness, adjust_contrast, adjust_saturation
from vitlab.errors import ConfigError, DataError

ADJUSTMENTS = [
    (adjust_brightness, TF.adjust_brightness),
    (adjust_contrast, TF.adjust_contrast),
    (adjust_saturation, TF.adjust_saturation),
]


def jitter(strength, seed=0):
    return BatchAugment(AugmentConfig(color_jitter=strength), num_classes=10, generator_seed=seed)


def labels(n):
    return torch.zeros(n, dtype=torch.long)


@pytest.mark.parametrize("ours, theirs", ADJUSTMENTS)
@pytest.mark.parametrize("factor", [0.0, 0.6, 1.0, 1.4])
@pytest.mark.parametrize("channels", [1, 3])
def test_each_adjustment_matches_torchvision_for_a_fixed_factor(ours, theirs, factor, channels):
    images = torch.rand(4, channels, 9, 7, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(ours(images, factor), theirs(images, factor), atol=1e-6, rtol=0)


@pytest.mark.parametrize("channels", [1, 3])
def test_the_jitter_is_torchvision_per_image_with_its_drawn_factors_in_order(channels):
    strength, seed = 0.4, 5
    images = torch.rand(6, channels, 8, 8)
    out, _ = jitter(strength, seed)(images, labels(6))
    draws = torch.rand((3, 6), generator=torch.Generator().manual_seed(seed))  # the augmenter's first draw
    factors = 1 + strength * (2 * draws - 1)
    assert ((factors >= 1 - strength) & (factors <= 1 + strength)).all()
    for image, got, (brightness, contrast, saturation) in zip(images, out, factors.T.tolist()):
        expected = TF.adjust_brightness(image, brightness)
        expected = TF.adjust_contrast(expected, contrast)
        expected = TF.adjust_saturation(expected, saturation)
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_strength_zero_is_the_identity():
    images = torch.rand(8, 3, 6, 6)
    assert torch.equal(jitter(0.0).color_jitter(images, 0.0), images)
    assert torch.equal(jitter(0.0)(images, labels(8))[0], images)


def test_output_stays_in_range_and_factors_differ_per_sample():
    image = torch.rand(1, 3, 10, 10)
    out, _ = jitter(1.0)(image.expand(32, -1, -1, -1), labels(32))
    assert 0 <= float(out.min()) and float(out.max()) <= 1
    assert len({o.numpy().tobytes() for o in out}) == 32


def test_deterministic_given_the_seed_and_the_global_generator_untouched():
    images = torch.rand(16, 3, 6, 6)
    state = torch.get_rng_state()
    first, second = jitter(0.4, seed=3), jitter(0.4, seed=3)
    for _ in range(2):
        assert torch.equal(first(images, labels(16))[0], second(images, labels(16))[0])
    assert torch.equal(torch.get_rng_state(), state)
    assert not torch.equal(jitter(0.4, seed=4)(images, labels(16))[0], first(images, labels(16))[0])


def test_brightness_scales_the_mean_by_its_factor_until_clipping():
    images = torch.rand(5, 3, 8, 8) * 0.5  # at most 0.5: factors up to 2 clip nothing
    factors = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0])
    out = adjust_brightness(images, factors)
    torch.testing.assert_close(out.mean((1, 2, 3)), factors * images.mean((1, 2, 3)))
    bright = torch.full((1, 3, 4, 4), 0.8)
    assert torch.equal(adjust_brightness(bright, 1.5), torch.ones_like(bright))  # 1.2 clipped to 1


def test_saturation_is_the_identity_on_grey_images():
    grey = torch.rand(4, 1, 6, 6)
    for factor in (0.0, 0.5, 1.7):
        assert torch.equal(adjust_saturation(grey, factor), grey)
    # contrast still acts on grey images: factor 0 leaves each image's mean grey level everywhere
    flat = adjust_contrast(grey, 0.0)
    torch.testing.assert_close(flat, grey.mean((1, 2, 3), keepdim=True).expand_as(grey))


def test_strength_range_and_channel_count_are_checked():
    for strength in (-0.1, 1.5):
        with pytest.raises(ConfigError, match="color_jitter"):
            AugmentConfig(color_jitter=strength)
    with pytest.raises(DataError, match="2"):
        jitter(0.4)(torch.rand(2, 2, 4, 4), labels(2))
