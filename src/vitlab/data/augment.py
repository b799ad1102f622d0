"""Batched augmentation on in-memory tensors (normalisation is :mod:`vitlab.data.preprocess`'s).

Everything works on a whole batch ``(B, C, H, W)`` float in ``[0, 1]`` at once, with per-sample
randomness: random crop with padding (one padded tensor, per-sample offsets gathered in one index),
horizontal flips by a per-sample mask, colour jitter by per-sample factors (torchvision's brightness,
contrast and saturation adjustments, batched), random erasing by per-sample rectangle masks. RandAugment and
TrivialAugment are torchvision's ``transforms.v2`` on uint8, applied to groups of ``auto_group``
images (a torchvision call draws one set of ops for all images it gets; per image is ~6x slower).
MixUp and CutMix are torchvision's, one draw per batch as in timm's default "batch" mode.

All randomness comes from the augmenter's own generator: torchvision's transforms run under
:func:`torch.random.fork_rng` with a seed drawn from it, so a ``BatchAugment`` is deterministic given
its seed and leaves the global random state untouched.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torchvision.ops import roi_align
from torchvision.transforms import v2

from ..checks import Bool, Check, Float, Int, Maybe, OneOf, shown
from ..errors import ConfigError, DataError

AUTO_AUGMENTS = ("randaugment", "trivialaugment")
PRESETS = ("none", "light", "strong")
AUGMENT_RANGES = {
    "resized_crop": "is the smallest area fraction in [0, 1] (0 = off; timm's usual is 0.08)",
    "crop_padding": "must be an integer in [0, 4096] (pixels of padding; 0 = off)",
    "color_jitter": "is a strength in [0, 1] (factors in [1 - s, 1 + s]; timm's usual is 0.4)",
    "auto": f"must be one of {AUTO_AUGMENTS} or null",
    "erasing": "is a probability in [0, 1]",
    "mix_prob": "is a probability in [0, 1]",
    "switch_prob": "is a probability in [0, 1]",
}
"""What a message says of a field's values where its range needs a word more than the check's own."""


@dataclass
class AugmentConfig:
    """What to apply to each training batch, in this order: crop, flip, colour jitter, auto-augment, erasing, mixing.

    resized_crop: RandomResizedCrop: a random part of each image, ``resized_crop`` to all of its area and
        of aspect ratio 3/4 to 4/3 (torchvision's rule), resized to the whole image; 0 = off, timm's
        usual is 0.08. A streamed dataset crops in its decoding workers, on the full-size photo.
    crop_padding: pad each side by this many zero pixels, then crop back to the original size at a
        random offset per image (0 = off).
    hflip: mirror each image left-right with probability 0.5 (only where a flip keeps the class).
    color_jitter: strength ``s`` in [0, 1]: per image, brightness, contrast and saturation each scaled by a
        factor uniform in ``[1 - s, 1 + s]``, in that order (timm's ``color_jitter=s``: torchvision's
        ``ColorJitter(s, s, s)``, in a fixed order, no hue). On 1-channel images saturation is the identity.
    auto: "randaugment" (``auto_ops`` ops of magnitude ``auto_magnitude``) or "trivialaugment"; None = off.
    auto_group: images that share one draw of auto-augment ops.
    erasing: probability per image of replacing a random rectangle (2-33% of the area, aspect 0.3-3.3,
        as torchvision's RandomErasing) by uniform noise in [0, 1].
    mixup_alpha / cutmix_alpha: Beta parameters (0 = off). With mixing on, targets are soft.
    mix_prob: probability per batch of mixing; switch_prob: probability of CutMix when both are on.
    """

    resized_crop: float = 0.0
    crop_padding: int = 0
    hflip: bool = False
    color_jitter: float = 0.0
    auto: str | None = None
    auto_ops: int = 2
    auto_magnitude: int = 9
    auto_group: int = 8
    erasing: float = 0.0
    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    mix_prob: float = 1.0
    switch_prob: float = 0.5

    @staticmethod
    def checks() -> dict[str, Check]:
        """Each field's type and range (see :mod:`vitlab.models.config`)."""
        unit = Float(0.0, 1.0)
        return {
            "resized_crop": unit,
            "crop_padding": Int(0, 4096),
            "hflip": Bool(),
            "color_jitter": unit,
            "auto": Maybe(OneOf(AUTO_AUGMENTS)),
            "auto_ops": Int(0, 64),
            "auto_magnitude": Int(0, 30),
            "auto_group": Int(1, 2**20),
            "erasing": unit,
            "mixup_alpha": Float(0.0, 1e3),
            "cutmix_alpha": Float(0.0, 1e3),
            "mix_prob": unit,
            "switch_prob": unit,
        }

    def __post_init__(self) -> None:
        for name, check in self.checks().items():
            value = getattr(self, name)
            try:
                setattr(self, name, check(name, value))
            except ConfigError:
                raise ConfigError(
                    f"{name} {AUGMENT_RANGES.get(name, 'must be ' + check.describe())}, got {shown(value)}"
                ) from None

    @property
    def mixing(self) -> bool:
        """True when MixUp or CutMix is on, so targets are soft ``(B, num_classes)``."""
        return self.mixup_alpha > 0 or self.cutmix_alpha > 0

    @classmethod
    def preset(cls, name: str, *, image_size: int = 32, hflip_ok: bool = True, **overrides) -> AugmentConfig:
        """A named recipe: "none"; "light" = crop with padding ``image_size // 8`` (at least 1) plus flips
        if ``hflip_ok`` (pass ``DataSplits.hflip_ok``: never for digits); "strong" = light + RandAugment
        (2 ops, magnitude 9), random erasing 0.25, MixUp 0.8 / CutMix 1.0 (DeiT's recipe).
        ``overrides`` replace single fields."""
        if name not in PRESETS:
            raise ConfigError(f"unknown augmentation preset {name!r}; choose one of {PRESETS}")
        config = cls()
        if name in ("light", "strong"):
            config = replace(config, crop_padding=max(1, image_size // 8), hflip=hflip_ok)
        if name == "strong":
            config = replace(config, auto="randaugment", erasing=0.25, mixup_alpha=0.8, cutmix_alpha=1.0)
        return replace(config, **overrides)


class BatchAugment:
    """``(images (B, C, H, W) in [0, 1], labels (B,) int64) -> (images (B, C, H, W) in [0, 1], targets)``.

    ``targets`` is ``labels`` unchanged when the config has no mixing, else soft targets
    ``(B, num_classes)`` float whose rows sum to 1 (one-hot for batches that mix_prob leaves unmixed).
    Deterministic given ``generator_seed``; runs on the images' device.
    """

    def __init__(self, config: AugmentConfig, num_classes: int, generator_seed: int = 0) -> None:
        self.config = config
        self.num_classes = num_classes
        self.generator = torch.Generator().manual_seed(generator_seed)
        self.auto: Callable | None = None
        if config.auto == "randaugment":
            self.auto = v2.RandAugment(num_ops=config.auto_ops, magnitude=config.auto_magnitude)
        elif config.auto == "trivialaugment":
            self.auto = v2.TrivialAugmentWide()
        self.mixup = v2.MixUp(alpha=config.mixup_alpha, num_classes=num_classes) if config.mixup_alpha > 0 else None
        self.cutmix = v2.CutMix(alpha=config.cutmix_alpha, num_classes=num_classes) if config.cutmix_alpha > 0 else None

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if images.ndim != 4 or labels.shape != images.shape[:1]:
            raise DataError(
                f"expected images (B, C, H, W) and labels (B,), got {tuple(images.shape)} and {tuple(labels.shape)}"
            )
        c = self.config
        if c.resized_crop:
            images = self.random_resized_crop(images, c.resized_crop)
        if c.crop_padding:
            images = self.random_crop(images, c.crop_padding)
        if c.hflip:
            images = torch.where(self._rand(len(images), like=images).view(-1, 1, 1, 1) < 0.5, images.flip(-1), images)
        if c.color_jitter:
            images = self.color_jitter(images, c.color_jitter)
        if self.auto is not None:
            images = self._auto_augment(self.auto, images)
        if c.erasing:
            images = self.random_erase(images, c.erasing)
        if not c.mixing:
            return images, labels
        if float(self._rand(1)) >= c.mix_prob:
            return images, F.one_hot(labels, self.num_classes).to(images.dtype)
        use_cutmix = self.cutmix is not None and (self.mixup is None or float(self._rand(1)) < c.switch_prob)
        mix = self.cutmix if use_cutmix else self.mixup
        if mix is None:
            raise ConfigError(
                f"the augment config mixes images but BatchAugment was built without MixUp or CutMix: "
                f"build it again from the config (mixup_alpha={c.mixup_alpha}, "
                f"cutmix_alpha={c.cutmix_alpha})"
            )
        return self._torchvision(mix, images, labels)

    def random_resized_crop(self, images: torch.Tensor, min_scale: float) -> torch.Tensor:
        """A random box per image of ``(B, C, H, W)`` (area ``min_scale`` to 1, aspect 3/4 to 4/3), resized
        bilinearly to ``H x W`` in one batched ``roi_align``."""
        b, _, h, w = images.shape
        boxes = torch.tensor(
            [resized_crop_box(h, w, min_scale, self.generator) for _ in range(b)], dtype=images.dtype
        ).to(images.device)
        rois = torch.cat([torch.arange(b, dtype=images.dtype, device=images.device)[:, None], boxes], dim=1)
        return roi_align(images, rois, (h, w), spatial_scale=1.0, sampling_ratio=2, aligned=True)

    def random_crop(self, images: torch.Tensor, padding: int) -> torch.Tensor:
        """Zero-pad ``(B, C, H, W)`` by ``padding`` on each side and crop ``H x W`` at a random offset per image."""
        b, _, h, w = images.shape
        padded = F.pad(images, (padding,) * 4).permute(0, 2, 3, 1)  # (B, H + 2p, W + 2p, C)
        dy, dx = torch.randint(0, 2 * padding + 1, (2, b), generator=self.generator).to(images.device)
        rows = dy[:, None] + torch.arange(h, device=images.device)  # (B, H)
        cols = dx[:, None] + torch.arange(w, device=images.device)  # (B, W)
        batch = torch.arange(b, device=images.device)[:, None, None]
        return padded[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2).contiguous()

    def color_jitter(self, images: torch.Tensor, strength: float) -> torch.Tensor:
        """Scale the brightness, then the contrast, then the saturation of each image of ``(B, C, H, W)`` (``C`` 1
        or 3) by its own factors, each uniform in ``[1 - strength, 1 + strength]``."""
        factors = 1 + strength * (2 * self._rand(3, len(images), like=images) - 1)  # (3, B)
        images = adjust_brightness(images, factors[0])
        images = adjust_contrast(images, factors[1])
        return adjust_saturation(images, factors[2])

    def random_erase(self, images: torch.Tensor, p: float) -> torch.Tensor:
        """With probability ``p`` per image, fill one random rectangle of ``(B, C, H, W)`` with uniform noise."""
        b, _, h, w = images.shape
        area = self._rand(b) * (0.33 - 0.02) + 0.02
        aspect = torch.exp(self._rand(b) * (math.log(3.3) - math.log(0.3)) + math.log(0.3))
        eh = torch.sqrt(area * h * w * aspect).round().clamp(1, h)
        ew = torch.sqrt(area * h * w / aspect).round().clamp(1, w)
        top = (self._rand(b) * (h - eh + 1)).floor()
        left = (self._rand(b) * (w - ew + 1)).floor()
        ys, xs = torch.arange(h)[None, :], torch.arange(w)[None, :]
        inside_y = (ys >= top[:, None]) & (ys < (top + eh)[:, None])  # (B, H)
        inside_x = (xs >= left[:, None]) & (xs < (left + ew)[:, None])  # (B, W)
        mask = inside_y[:, :, None] & inside_x[:, None, :] & (self._rand(b) < p)[:, None, None]
        noise = self._rand(*images.shape, like=images)
        return torch.where(mask[:, None].to(images.device), noise, images)

    def _auto_augment(self, auto: Callable, images: torch.Tensor) -> torch.Tensor:
        as_uint8 = (images * 255).round().to(torch.uint8)
        groups = [self._torchvision(auto, group) for group in as_uint8.split(self.config.auto_group)]
        return torch.cat(groups).to(images.dtype) / 255

    def _torchvision(self, transform: Callable, *inputs: torch.Tensor):
        """Run a torchvision transform on the global CPU generator, seeded from ours and restored after."""
        seed = int(torch.randint(2**62, (1,), generator=self.generator))
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(seed)
            return transform(*inputs)

    def _rand(self, *shape: int, like: torch.Tensor | None = None) -> torch.Tensor:
        out = torch.rand(shape, generator=self.generator)
        return out if like is None else out.to(device=like.device, dtype=like.dtype)


def resized_crop_box(
    height: int, width: int, min_scale: float, generator: torch.Generator, ratio: tuple[float, float] = (3 / 4, 4 / 3)
) -> tuple[float, float, float, float]:
    """``(x0, y0, x1, y1)`` of a RandomResizedCrop box in an image ``height x width``: torchvision's rule
    (ten tries at an area in ``[min_scale, 1]`` and a log-uniform aspect, else the centre crop of the
    clamped aspect), drawn from ``generator``."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        u = torch.rand(3, generator=generator).tolist()
        target = area * (min_scale + (1 - min_scale) * u[0])
        aspect = math.exp(log_ratio[0] + (log_ratio[1] - log_ratio[0]) * u[1])
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = int(torch.randint(0, height - h + 1, (1,), generator=generator))
            left = int(torch.randint(0, width - w + 1, (1,), generator=generator))
            return float(left), float(top), float(left + w), float(top + h)
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, round(width / ratio[0])
    elif in_ratio > ratio[1]:
        w, h = round(height * ratio[1]), height
    else:
        w, h = width, height
    top, left = (height - h) // 2, (width - w) // 2
    return float(left), float(top), float(left + w), float(top + h)


def blend(images: torch.Tensor, other: torch.Tensor, factor: torch.Tensor | float) -> torch.Tensor:
    """``factor * images + (1 - factor) * other`` clipped to ``[0, 1]``, ``factor`` one per image ``(B,)`` or one
    for all (torchvision's ``_blend``)."""
    factor = torch.as_tensor(factor, dtype=images.dtype, device=images.device).reshape(-1, 1, 1, 1)
    return (images * factor + other * (1 - factor)).clamp(0, 1)


def luma(images: torch.Tensor) -> torch.Tensor:
    """``(B, C, H, W) -> (B, 1, H, W)``: ``0.2989 R + 0.587 G + 0.114 B`` for ``C = 3`` (ITU-R 601-2, as
    torchvision's grayscale), the image itself for ``C = 1``."""
    channels = images.shape[1]
    if channels == 1:
        return images
    if channels != 3:
        raise DataError(f"colour adjustments need 1 (grey) or 3 (RGB) channels, got {channels}: drop color_jitter")
    r, g, b = images.unbind(1)
    return (0.2989 * r + 0.587 * g + 0.114 * b).unsqueeze(1)


def adjust_brightness(images: torch.Tensor, factor: torch.Tensor | float) -> torch.Tensor:
    """Blend with black: ``factor * images`` clipped (``factor (B,)`` or one float; 0: black, 1: unchanged)."""
    return blend(images, torch.zeros_like(images), factor)


def adjust_contrast(images: torch.Tensor, factor: torch.Tensor | float) -> torch.Tensor:
    """Blend with each image's mean grey level (0: flat grey, 1: unchanged)."""
    return blend(images, luma(images).mean((1, 2, 3), keepdim=True), factor)


def adjust_saturation(images: torch.Tensor, factor: torch.Tensor | float) -> torch.Tensor:
    """Blend with each pixel's grey level (0: greyscale, 1: unchanged); 1-channel images are already grey, so this
    is the identity on them."""
    return images if images.shape[1] == 1 else blend(images, luma(images), factor)
