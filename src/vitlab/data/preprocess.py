"""How one decoded image becomes a model's input: :class:`Preprocess`, the source model's own pipeline, exactly.

Evaluation is timm's ``transforms_imagenet_eval``, pixel for pixel: the target size divided by ``crop_pct``
(floored) is the resize, then a centre crop to ``image_size``. ``crop_mode`` says how the resize treats the
aspect ratio::

    squash   both sides to floor(size / crop_pct): the aspect ratio is not kept (vitlab's default, crop_pct 1)
    center   the shorter side to floor(size / crop_pct), aspect kept (timm's default); a non-square size
             scales by the smaller ratio (timm's ResizeKeepRatio)
    border   the longer side to floor(size / crop_pct), aspect kept, then padded with round(255 * mean)

Resizing and cropping are torchvision's functions on the PIL image (PIL's resampling), as timm calls them.
A Hugging Face image processor (:meth:`Preprocess.from_hf`) is the same pipeline with two conventions of its
own, recorded in two fields: ``resize_backend="tensor"`` resamples the uint8 tensor with torchvision's
antialiased kernels (transformers' default torchvision image processors do; PIL's resampling differs by a
grey level or more in places), and ``crop_rounding="floor"`` floors an odd centre-crop margin where
torchvision's ``CenterCrop`` rounds it.

Images leave :meth:`Preprocess.eval_image` as uint8 ``(C, H, W)``; :meth:`Preprocess.normalize` (and the
functions :func:`normalize` / :func:`normalize_` for a dataset's own statistics) turn pixels into the model's
input, ``(x / 255 - mean) / std``. This module is the one place that computes that, and the one place that
picks a resampling filter: every other module asks a :class:`Preprocess` (or its
:class:`~vitlab.data.config.DataConfig`). ``Preprocess()`` (32 x 32, squash, bilinear) gives the pixels of
:func:`vitlab.data.read_image` exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, NamedTuple, Protocol

import torch
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as F
from torchvision.transforms.v2 import functional as F2

from ..errors import ConfigError, DataError

INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "lanczos", "box", "hamming")
CROP_MODES = ("center", "squash", "border")  # timm's crop_mode values
RESIZE_BACKENDS = ("pil", "tensor")
CROP_ROUNDINGS = ("round", "floor")
MAX_CROP_PCT = 2.0
TIMM_DEFAULTS: dict[str, Any] = {  # what timm's resolve_data_config assumes for a key a pretrained_cfg lacks
    "input_size": (3, 224, 224),
    "interpolation": "bicubic",
    "crop_pct": 0.875,
    "crop_mode": "center",
    "mean": (0.485, 0.456, 0.406),
    "std": (0.229, 0.224, 0.225),
}

_MODES = {name: InterpolationMode(name) for name in INTERPOLATIONS}
# transformers' pil_torch_interpolation_mapping sends PIL's NEAREST to torchvision's NEAREST_EXACT
_TENSOR_MODES = {**_MODES, "nearest": InterpolationMode.NEAREST_EXACT}
TENSOR_INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "lanczos")
"""The filters torchvision resamples a tensor with (``resize_backend="tensor"``, and images decoded on a device)."""
PIL_CODES = {"nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5}
"""PIL's resampling code of each filter (a Hugging Face ``resample``)."""
_PIL_CODES = {code: name for name, code in PIL_CODES.items()}


class Box(NamedTuple):
    """A training crop of a decoded image (pixels, rows from the top, columns from the left) and whether it
    is mirrored left-right after the resize: what :meth:`Preprocess.train_box` draws."""

    top: int
    left: int
    height: int
    width: int
    flip: bool


def _fail(field: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"preprocess {field}={value!r} is out of range: {allowed}")


def _floats(value: Any, field: str) -> tuple[float, ...] | None:
    if value is None:
        return None
    try:
        values = tuple(float(v) for v in ([value] if isinstance(value, (int, float)) else value))
    except (TypeError, ValueError):
        raise _fail(field, value, "one number per channel, or None") from None
    return values


@dataclass(frozen=True)
class Preprocess:
    """How one decoded image (PIL) becomes the model's input, timm's eval pipeline exactly.

    image_size: ``(H, W)`` of the model input (an int is a square).
    channels: 3 (``convert("RGB")``) or 1 (``convert("L")``).
    crop_pct: the resize goes to ``floor(size / crop_pct)`` before the centre crop to ``size``; in (0, 2].
    crop_mode: "squash", "center" or "border" (see the module docstring).
    interpolation: one of :data:`INTERPOLATIONS` (PIL's filters).
    mean, std: per-channel normalisation of pixels in [0, 1]; None: the dataset's own statistics.
    resize_backend: "pil" (PIL's resampling, as timm) or "tensor" (torchvision's antialiased resampling
        of the uint8 tensor, as transformers' default image processors).
    crop_rounding: "round" (torchvision's ``CenterCrop``, as timm) or "floor" (as transformers) for an odd margin.
    """

    image_size: tuple[int, int] = (32, 32)
    channels: int = 3
    crop_pct: float = 1.0
    crop_mode: str = "squash"
    interpolation: str = "bilinear"
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    resize_backend: str = "pil"
    crop_rounding: str = "round"

    def __post_init__(self) -> None:
        size = self.image_size
        pair = (size, size) if isinstance(size, int) else tuple(size) if isinstance(size, (tuple, list)) else ()
        if len(pair) != 2 or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in pair):
            raise _fail("image_size", size, "an int >= 1 or (H, W) of two ints >= 1")
        object.__setattr__(self, "image_size", pair)
        if self.channels not in (1, 3) or isinstance(self.channels, bool):
            raise _fail("channels", self.channels, "1 (greyscale) or 3 (RGB)")
        if not isinstance(self.crop_pct, (int, float)) or not 0 < self.crop_pct <= MAX_CROP_PCT:
            raise _fail("crop_pct", self.crop_pct, f"a number in (0, {MAX_CROP_PCT:g}]")
        object.__setattr__(self, "crop_pct", float(self.crop_pct))
        for name, allowed in (
            ("crop_mode", CROP_MODES),
            ("interpolation", INTERPOLATIONS),
            ("resize_backend", RESIZE_BACKENDS),
            ("crop_rounding", CROP_ROUNDINGS),
        ):
            if getattr(self, name) not in allowed:
                raise _fail(name, getattr(self, name), f"one of {', '.join(allowed)}")
        if self.resize_backend == "tensor" and self.interpolation not in TENSOR_INTERPOLATIONS:
            raise _fail(
                "interpolation",
                self.interpolation,
                f"one of {', '.join(TENSOR_INTERPOLATIONS)} with resize_backend='tensor' (use 'pil')",
            )
        mean, std = _floats(self.mean, "mean"), _floats(self.std, "std")
        if (mean is None) != (std is None):
            raise _fail("mean" if mean is None else "std", None, "mean and std are given together or both None")
        if mean is not None and std is not None:
            if len(mean) == 1 and self.channels > 1:
                mean, std = mean * self.channels, std * (self.channels if len(std) == 1 else 1)
            if len(mean) != self.channels or len(std) != self.channels:
                bad = "mean" if len(mean) != self.channels else "std"
                raise _fail(bad, mean if bad == "mean" else std, f"{self.channels} values (one per channel)")
            if not all(math.isfinite(m) for m in mean):
                raise _fail("mean", mean, "finite numbers")
            if not all(math.isfinite(s) and s > 0 for s in std):
                raise _fail("std", std, "finite numbers > 0")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "std", std)

    # -- the pipelines -----------------------------------------------------------------------------

    @property
    def scale_size(self) -> tuple[int, int]:
        """``(floor(H / crop_pct), floor(W / crop_pct))``: the size the resize aims at (timm's ``scale_size``)."""
        return math.floor(self.image_size[0] / self.crop_pct), math.floor(self.image_size[1] / self.crop_pct)

    def describe(self) -> str:
        """One line: size, resize and crop, filter and its implementation."""
        (height, width), (scale_h, scale_w) = self.image_size, self.scale_size
        how = {"squash": "both sides", "center": "the shorter side", "border": "the longer side (padded)"}
        crop = f", centre crop {height}x{width}" if (scale_h, scale_w) != (height, width) else ""
        library = "PIL's" if self.resize_backend == "pil" else "torchvision's"
        return f"resize {how[self.crop_mode]} to {scale_h}x{scale_w}{crop}, {self.interpolation} ({library})"

    def convert(self, image: Image.Image) -> Image.Image:
        """``image`` in this pipeline's mode: ``convert("RGB")`` or ``convert("L")`` (a no-op when it is already)."""
        mode = "RGB" if self.channels == 3 else "L"
        return image if image.mode == mode else image.convert(mode)

    def eval_image(self, image: Image.Image | torch.Tensor) -> torch.Tensor:
        """``image`` resized and centre-cropped as timm's eval transform does: uint8 ``(C, H, W)``. A uint8
        tensor ``(C, H, W)`` (already in this pipeline's channels, on any device) is resized with torchvision's
        antialiased kernels whatever ``resize_backend`` says: PIL's filters exist only for PIL images."""
        if isinstance(image, Image.Image):
            image = self.convert(image)
        size, fill = self.eval_size(*_height_width(image))
        return self._crop_or_pad(self._resize(image, size), self.image_size, fill)

    def eval_size(self, height: int, width: int) -> tuple[int | list[int], tuple[int, ...] | int]:
        """``(resize, fill)`` for an image ``height x width``: the resize's target (an int: the shorter side,
        torchvision's ``Resize(int)`` rule; else ``[H, W]``) before the centre crop, and the padding value."""
        scale = self.scale_size
        if self.crop_mode == "squash":
            return list(scale), 0
        if self.crop_mode == "center" and scale[0] == scale[1]:
            return scale[0], 0
        size = _keep_ratio((height, width), scale, longest=1.0 if self.crop_mode == "border" else 0.0)
        if self.crop_mode == "border" and self.mean is not None:
            return size, tuple(round(255 * m) for m in self.mean)
        return size, 0

    def train_image(
        self,
        image: Image.Image,
        generator: torch.Generator,
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        hflip: bool = True,
    ) -> torch.Tensor:
        """A random part of ``image`` (torchvision's ``RandomResizedCrop`` rule, drawn from ``generator``)
        resized to ``image_size``, then mirrored left-right with probability 0.5 when ``hflip``:
        uint8 ``(C, H, W)``. The same generator state gives the same pixels: :meth:`train_box`, then
        :meth:`resized_crop`."""
        image = self.convert(image)
        return self.resized_crop(image, self.train_box(image.height, image.width, generator, scale, ratio, hflip))

    def train_box(
        self,
        height: int,
        width: int,
        generator: torch.Generator,
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        hflip: bool = True,
    ) -> Box:
        """Where :meth:`train_image` crops an image ``height x width`` and whether it mirrors it, drawn from
        ``generator`` (the crop's draws, then the flip's): computed from the header alone, before decoding."""
        if not (0 < scale[0] <= scale[1]) or not (0 < ratio[0] <= ratio[1]):
            raise ConfigError(
                f"train_image needs 0 < scale[0] <= scale[1] and 0 < ratio[0] <= ratio[1], got {scale} {ratio}"
            )
        top, left, h, w = random_resized_crop_params(height, width, scale, ratio, generator)
        flip = hflip and torch.rand(1, generator=generator).item() < 0.5
        return Box(top, left, h, w, flip)

    def resized_crop(self, image: Image.Image | torch.Tensor, box: Box) -> torch.Tensor:
        """``box`` of ``image`` resized to ``image_size`` (and mirrored when ``box.flip``): uint8 ``(C, H, W)``.
        A uint8 tensor ``(C, H, W)`` on any device is resized with torchvision's antialiased kernels."""
        size = list(self.image_size)
        if isinstance(image, Image.Image) and self.resize_backend == "pil":
            pixels = _pixels(F.resized_crop(image, box.top, box.left, box.height, box.width, size, self._mode()))
        else:
            crop = _tensor(image)[:, box.top : box.top + box.height, box.left : box.left + box.width]
            pixels = F2.resize(crop, size, interpolation=self._mode(tensor=True), antialias=True)
        return (pixels.flip(-1) if box.flip else pixels).contiguous()

    def normalize(self, pixels: torch.Tensor) -> torch.Tensor:
        """uint8 or float-in-[0, 1] ``(..., C, H, W)`` -> float32 ``(x - mean) / std`` (needs mean and std)."""
        if self.mean is None or self.std is None:
            raise ConfigError("this preprocess has no mean/std (the dataset's own statistics): normalise with those")
        return Statistics(self.mean, self.std).normalize(pixels)

    def eval_input(self, image: Image.Image) -> torch.Tensor:
        """The model's input for ``image``: :meth:`eval_image`, then :meth:`normalize`: float32 ``(C, H, W)``."""
        return self.normalize(self.eval_image(image))

    def train_input(self, image: Image.Image, generator: torch.Generator, **crop: Any) -> torch.Tensor:
        """A training input for ``image``: :meth:`train_image` (``crop``: its ``scale``, ``ratio``, ``hflip``),
        then :meth:`normalize`: float32 ``(C, H, W)``."""
        return self.normalize(self.train_image(image, generator, **crop))

    def _mode(self, tensor: bool = False) -> InterpolationMode:
        """The resampling filter: PIL's, or torchvision's tensor kernel (``tensor``) of the same name."""
        if not tensor:
            return _MODES[self.interpolation]
        if self.interpolation not in TENSOR_INTERPOLATIONS:
            raise _fail(
                "interpolation",
                self.interpolation,
                f"one of {', '.join(TENSOR_INTERPOLATIONS)} to resize a tensor (torchvision's kernels)",
            )
        return _TENSOR_MODES[self.interpolation]

    def _resize(self, image: Image.Image | torch.Tensor, size: int | list[int]) -> torch.Tensor:
        if isinstance(image, Image.Image) and self.resize_backend == "pil":
            return _pixels(F.resize(image, size, self._mode()))
        sizes = [size] if isinstance(size, int) else size
        return F2.resize(_tensor(image), sizes, self._mode(tensor=True), antialias=True)

    def _crop_or_pad(self, pixels: torch.Tensor, size: tuple[int, int], fill: tuple[int, ...] | int) -> torch.Tensor:
        """Centre crop to ``size``, padding first where the image is smaller (torchvision's ``center_crop`` and
        timm's ``center_crop_or_pad``, which pad with ``fill`` the same way)."""
        crop_h, crop_w = size
        _, height, width = pixels.shape
        if crop_w > width or crop_h > height:
            left, top = max(crop_w - width, 0) // 2, max(crop_h - height, 0) // 2
            right, bottom = max(crop_w - width + 1, 0) // 2, max(crop_h - height + 1, 0) // 2
            values = (fill,) * pixels.shape[0] if isinstance(fill, int) else fill
            padded = torch.stack(
                [torch.nn.functional.pad(c, (left, right, top, bottom), value=v) for c, v in zip(pixels, values)]
            )
            pixels, (_, height, width) = padded, padded.shape
        if self.crop_rounding == "round":
            top, left = int(round((height - crop_h) / 2.0)), int(round((width - crop_w) / 2.0))
        else:
            top, left = (height - crop_h) // 2, (width - crop_w) // 2
        return pixels[:, top : top + crop_h, left : left + crop_w].contiguous()

    # -- records ------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (lists for tuples)."""
        d = asdict(self)
        d["image_size"] = list(self.image_size)
        d["mean"] = None if self.mean is None else list(self.mean)
        d["std"] = None if self.std is None else list(self.std)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Preprocess:
        """The inverse of :meth:`to_dict`; an unknown key is a :class:`ConfigError` naming it."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ConfigError(f"unknown preprocess field(s) {', '.join(unknown)}: the fields are {', '.join(known)}")
        return cls(**dict(d))

    @classmethod
    def from_timm(cls, pretrained_cfg: Mapping[str, Any]) -> Preprocess:
        """timm's eval pipeline for a model's ``pretrained_cfg`` (``input_size``, ``interpolation``, ``crop_pct``,
        ``crop_mode``, ``mean``, ``std``), with the defaults timm's ``resolve_data_config`` takes for a missing one."""
        cfg = {k: v for k, v in pretrained_cfg.items() if v not in (None, "", 0)}
        input_size = cfg.get("input_size", TIMM_DEFAULTS["input_size"])
        if not isinstance(input_size, (list, tuple)) or len(input_size) != 3:
            raise _fail("input_size", input_size, "timm's (channels, H, W)")
        interpolation = cfg.get("interpolation", TIMM_DEFAULTS["interpolation"])
        if interpolation == "random":
            raise _fail("interpolation", interpolation, f"one of {', '.join(INTERPOLATIONS)} ('random' trains only)")
        return cls(
            image_size=(int(input_size[1]), int(input_size[2])),
            channels=int(input_size[0]),
            crop_pct=cfg.get("crop_pct", TIMM_DEFAULTS["crop_pct"]),
            crop_mode=cfg.get("crop_mode", TIMM_DEFAULTS["crop_mode"]),
            interpolation=interpolation,
            mean=tuple(cfg.get("mean", TIMM_DEFAULTS["mean"])),
            std=tuple(cfg.get("std", TIMM_DEFAULTS["std"])),
        )

    def to_timm(self) -> dict[str, Any]:
        """This pipeline as timm's ``pretrained_cfg`` keys (input_size, interpolation, crop_pct, crop_mode, mean,
        std). A transformers-only convention (``resize_backend="tensor"``, ``crop_rounding="floor"``) has no timm
        key: timm reproduces such a pipeline to a grey level, not exactly."""
        out: dict[str, Any] = {
            "input_size": (self.channels, *self.image_size),
            "interpolation": self.interpolation,
            "crop_pct": self.crop_pct,
            "crop_mode": self.crop_mode,
        }
        if self.mean is not None and self.std is not None:
            out["mean"], out["std"] = tuple(self.mean), tuple(self.std)
        return out

    @classmethod
    def from_hf(cls, processor: Mapping[str, Any], backend: str | None = None, channels: int = 3) -> Preprocess:
        """The pipeline of a Hugging Face image processor (``preprocessor_config.json``: ViT, DeiT, BEiT,
        ConvNext-style keys; a ``TimmWrapperImageProcessor``'s ``pretrained_cfg`` is :meth:`from_timm`'s), as the
        installed transformers computes it.

        ``backend``: "torchvision" or "pil", the image processor backend whose pixels to reproduce; None takes
        transformers' own choice (the PIL one for a ``...Pil`` processor type, else torchvision's). What the
        fields cannot express exactly is a :class:`ConfigError` naming the key: no resize, a resize to a
        fixed longest edge or a maximum size, a shortest-edge resize without a square crop. ``channels``: the
        model's input channels (1 for a greyscale model: one mean and std, or one broadcast).
        """
        return _from_hf(cls, processor, backend, channels)


def unit_pixels(pixels: torch.Tensor, into: BatchBuffer | None = None) -> torch.Tensor:
    """uint8 pixels -> float32 in [0, 1] (``x / 255``), written into ``into``'s tensor when it is free (a
    training loop's batch after batch); float pixels (already in [0, 1]) as they are."""
    if pixels.dtype != torch.uint8:
        return pixels
    if into is None:
        return pixels.float().div_(255)
    return into.take(pixels.shape, pixels.device).copy_(pixels).div_(255)


class BatchBuffer:
    """One float32 batch tensor, used again for the next batch of the same shape once nothing refers to the last:
    a loop's per-step input batch without a fresh allocation each step. A batch of 64 at 224 x 224 is 38 MB,
    above the size glibc serves from its heap, so a new one is new pages from the kernel, zeroed and faulted in one
    by one: about a third of the main process's time in a streamed epoch on the CPU.

    :meth:`take` hands out a new view of the tensor; while any view of it lives (the last step's inputs, the
    activations autograd saved from them, a caller's list, a NumPy array of it) its storage has other users
    and a new tensor is made instead. Where torch cannot count a storage's users, every batch is new."""

    def __init__(self) -> None:
        self._tensor: torch.Tensor | None = None

    def take(self, shape: Sequence[int] | torch.Size, device: torch.device) -> torch.Tensor:
        """A float32 tensor of ``shape`` on ``device`` that nothing else refers to (contents undefined)."""
        shape, tensor = torch.Size(shape), self._tensor
        if tensor is None or tensor.shape != shape or tensor.device != device or not _unshared(tensor):
            tensor = self._tensor = torch.empty(shape, dtype=torch.float32, device=device)
        return tensor.view(tensor.shape)


_storage_users = getattr(torch._C, "_storage_Use_Count", None)


def _unshared(tensor: torch.Tensor) -> bool:
    """Whether ``tensor``'s storage is referred to by ``tensor`` alone (and the wrapper that asks)."""
    return _storage_users is not None and _storage_users(tensor.untyped_storage()._cdata) == 2


def _statistics(
    images: torch.Tensor, mean: Sequence[float] | torch.Tensor, std: Sequence[float] | torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    channels = images.shape[-3] if images.ndim >= 3 else -1
    if images.ndim < 3 or len(mean) != channels or len(std) != channels:
        raise DataError(
            f"need images (..., C, H, W) and C means and stds; got images {tuple(images.shape)}, "
            f"{len(mean)} means, {len(std)} stds"
        )
    shape = (-1, 1, 1)
    mean_t = torch.as_tensor(mean, dtype=images.dtype, device=images.device).view(shape)
    std_t = torch.as_tensor(std, dtype=images.dtype, device=images.device).view(shape)
    return mean_t, std_t


def normalize(
    images: torch.Tensor, mean: Sequence[float] | torch.Tensor, std: Sequence[float] | torch.Tensor
) -> torch.Tensor:
    """``(images - mean) / std`` per channel; images float ``(..., C, H, W)`` in [0, 1], mean and std of length C."""
    mean_t, std_t = _statistics(images, mean, std)
    return (images - mean_t) / std_t


def normalize_(
    images: torch.Tensor, mean: Sequence[float] | torch.Tensor, std: Sequence[float] | torch.Tensor
) -> torch.Tensor:
    """:func:`normalize` in place on ``images`` (a batch's own float tensor, e.g. fresh from uint8): the
    same numbers without two more batch-sized tensors. Returns ``images``."""
    mean_t, std_t = _statistics(images, mean, std)
    return images.sub_(mean_t).div_(std_t)


def thumbnail(image: Image.Image, max_side: int) -> Image.Image:
    """``image`` shrunk (Lanczos, aspect kept) so its longest side is at most ``max_side``: an upload brought to a
    size that can be shown and sent around; the model's own resize and crop follow."""
    image = image.copy()
    image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    return image


def resize_images(images: torch.Tensor, size: tuple[int, int], antialias: bool = True) -> torch.Tensor:
    """Float images ``(N, C, H, W)`` in [0, 1] resized bilinearly to ``size``: a tensor dataset read at another
    size (Fashion-MNIST's 28 x 28 at 32; ``antialias``, clamped to [0, 1] where the kernel overshoots), or a
    tensor image fed to a model of another size (``antialias=False``, as the model was trained)."""
    resized = torch.nn.functional.interpolate(
        images, size=size, mode="bilinear", antialias=antialias, align_corners=False
    )
    return resized.clamp_(0, 1) if antialias else resized


class Normalizes(Protocol):
    """What turns pixels into a model's input: a :class:`Preprocess`, a :class:`Statistics`, a
    :class:`~vitlab.data.DataConfig` or a :class:`~vitlab.data.DataSplits`."""

    def normalize(self, pixels: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class Statistics:
    """Per-channel ``mean`` and ``std`` of pixels in [0, 1] (numbers, or tensors on the pixels' device)."""

    mean: Sequence[float] | torch.Tensor
    std: Sequence[float] | torch.Tensor

    @classmethod
    def unit(cls, channels: int) -> Statistics:
        """Mean 0 and std 1: pixels fed in [0, 1] as they are."""
        return cls((0.0,) * channels, (1.0,) * channels)

    def normalize(self, pixels: torch.Tensor, in_place: bool = False) -> torch.Tensor:
        """uint8 or float-in-[0, 1] ``(..., C, H, W)`` -> ``(x - mean) / std``; ``in_place`` reuses a float batch's
        own tensor; uint8 pixels are scaled into a new float tensor, which is then normalised in place (one
        batch-sized tensor made, not three)."""
        in_place = in_place or pixels.dtype == torch.uint8
        return (normalize_ if in_place else normalize)(unit_pixels(pixels), self.mean, self.std)


def _pixels(image: Image.Image) -> torch.Tensor:
    """PIL image -> uint8 ``(C, H, W)`` (a view of the pixels in PIL's layout; ``torch.stack`` copies it once)."""
    return F.pil_to_tensor(image)


def _tensor(image: Image.Image | torch.Tensor) -> torch.Tensor:
    """uint8 ``(C, H, W)``: a tensor as it is, a PIL image's pixels."""
    return image if isinstance(image, torch.Tensor) else _pixels(image)


def _height_width(image: Image.Image | torch.Tensor) -> tuple[int, int]:
    return (image.shape[-2], image.shape[-1]) if isinstance(image, torch.Tensor) else (image.height, image.width)


def _keep_ratio(image_hw: tuple[int, int], target: tuple[int, int], longest: float) -> list[int]:
    """timm's ``ResizeKeepRatio.get_params`` without random scaling: one ratio for both sides, mixing the larger
    (``longest=1``) and the smaller (``longest=0``) of the two side ratios."""
    ratio_h, ratio_w = image_hw[0] / target[0], image_hw[1] / target[1]
    ratio = max(ratio_h, ratio_w) * longest + min(ratio_h, ratio_w) * (1.0 - longest)
    return [round(x / ratio) for x in image_hw]


def random_resized_crop_params(
    height: int,
    width: int,
    scale: Sequence[float],
    ratio: Sequence[float],
    generator: torch.Generator,
) -> tuple[int, int, int, int]:
    """``(top, left, h, w)`` of a crop by torchvision's ``RandomResizedCrop.get_params`` rule (ten tries
    at a random area fraction in ``scale`` and log-uniform aspect in ``ratio``, else the central crop of the
    nearest allowed aspect), each draw taken from ``generator``."""
    area = height * width
    log_ratio = torch.log(torch.tensor(ratio, dtype=torch.float32))
    for _ in range(10):
        target_area = area * torch.empty(1).uniform_(scale[0], scale[1], generator=generator).item()
        log_aspect = torch.empty(1).uniform_(log_ratio[0].item(), log_ratio[1].item(), generator=generator)
        aspect = torch.exp(log_aspect).item()
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = int(torch.randint(0, height - h + 1, (1,), generator=generator).item())
            left = int(torch.randint(0, width - w + 1, (1,), generator=generator).item())
            return top, left, h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


# -- Hugging Face image processors -----------------------------------------------------------------

_HF_STANDARD = (0.5, 0.5, 0.5)
_HF_DEFAULTS: dict[str, dict[str, Any]] = {  # the class attributes of transformers' processors
    "ViTImageProcessor": {"size": {"height": 224, "width": 224}, "resample": 2, "do_center_crop": False},
    "DeiTImageProcessor": {
        "size": {"height": 256, "width": 256},
        "resample": 3,
        "do_center_crop": True,
        "crop_size": {"height": 224, "width": 224},
    },
    "BeitImageProcessor": {
        "size": {"height": 256, "width": 256},
        "resample": 3,
        "do_center_crop": True,
        "crop_size": {"height": 224, "width": 224},
    },
    "ConvNextImageProcessor": {"size": {"shortest_edge": 384}, "resample": 3, "crop_pct": 224 / 256},
}
_SQUARE_BY_DEFAULT = {"ConvNextImageProcessor": False}  # how an int `size` reads: (n, n) or the shortest edge


def _hf_size(value: Any, key: str, square: bool) -> dict[str, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return {"height": value, "width": value} if square else {"shortest_edge": value}
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return {"height": int(value[0]), "width": int(value[1])}
    if isinstance(value, Mapping):
        return {k: int(v) for k, v in value.items() if v is not None}
    raise _fail(key, value, "an int, (height, width), or a dict of height/width or shortest_edge")


def _pct_for(scaled: int, crop: int) -> float:
    """A ``crop_pct`` with ``floor(crop / crop_pct) == scaled``, nudged past float rounding where needed."""
    pct = crop / scaled
    for _ in range(4):
        if math.floor(crop / pct) == scaled:
            return pct
        pct = math.nextafter(pct, 0.0 if math.floor(crop / pct) < scaled else 2.0)
    raise _fail("crop_size", crop, f"a crop whose resize {scaled} is reachable as floor(crop / crop_pct)")


def _from_hf(cls: type[Preprocess], processor: Mapping[str, Any], backend: str | None, channels: int) -> Preprocess:
    legacy = str(processor.get("feature_extractor_type") or "").replace("FeatureExtractor", "ImageProcessor")
    kind = str(processor.get("image_processor_type") or legacy or "ViTImageProcessor")
    base = kind.removesuffix("Pil").removesuffix("Fast")
    if base == "TimmWrapperImageProcessor":  # timm's resolve_data_config + create_transform of its pretrained_cfg
        timm_cfg = processor.get("pretrained_cfg")
        if not isinstance(timm_cfg, Mapping):
            raise _fail("pretrained_cfg", timm_cfg, "timm's pretrained_cfg, which a TimmWrapperImageProcessor holds")
        timm = cls.from_timm(timm_cfg)
        if timm.channels != channels:
            raise _fail("pretrained_cfg.input_size", timm_cfg.get("input_size"), f"{channels} channels (the model's)")
        return timm
    if backend is None:
        backend = "pil" if kind.endswith("Pil") else "torchvision"
    if backend not in ("pil", "torchvision"):
        raise _fail("backend", backend, "'torchvision' or 'pil' (transformers' image processor backends)")
    defaults = _HF_DEFAULTS.get(base, _HF_DEFAULTS["ViTImageProcessor"])

    def get(key: str, default: Any = None) -> Any:
        value = processor.get(key)
        return defaults.get(key, default) if value is None else value

    if not get("do_resize", True):
        raise _fail("do_resize", False, "True: without a resize the input size depends on the image")
    resample = get("resample", 2)
    if resample not in _PIL_CODES:
        raise _fail("resample", resample, f"a PIL resampling code {sorted(_PIL_CODES)}")
    interpolation = _PIL_CODES[resample]
    square = _SQUARE_BY_DEFAULT.get(base, True)
    size = _hf_size(get("size"), "size", square)
    crop = _hf_size(get("crop_size"), "crop_size", True) if get("do_center_crop", False) else None
    if crop is not None and not {"height", "width"} <= set(crop):
        raise _fail("crop_size", crop, "a dict with height and width")
    if base == "ConvNextImageProcessor":
        if set(size) != {"shortest_edge"}:
            raise _fail("size", size, "{'shortest_edge': N} for a ConvNext image processor")
        edge, pct = size["shortest_edge"], float(get("crop_pct", 224 / 256))
        first = ((edge, edge), "center", pct) if edge < 384 else ((edge, edge), "squash", 1.0)
        if crop is not None and (crop["height"], crop["width"]) != first[0]:
            raise _fail("crop_size", crop, f"no second crop after ConvNext's own (to {edge}x{edge})")
        image_size, mode, crop_pct = first
    elif {"height", "width"} == set(size):
        if crop is None:
            image_size, mode, crop_pct = (size["height"], size["width"]), "squash", 1.0
        else:
            image_size, mode = (crop["height"], crop["width"]), "squash"
            if crop["height"] > size["height"] or crop["width"] > size["width"]:
                raise _fail("crop_size", crop, f"at most the resize {size} (transformers pads a larger crop)")
            crop_pct = _pct_for(size["height"], crop["height"])
            if math.floor(crop["width"] / crop_pct) != size["width"]:
                raise _fail("crop_size", crop, f"the same fraction of both sides of the resize {size} (one crop_pct)")
    elif set(size) == {"shortest_edge"}:
        if crop is None or crop["height"] != crop["width"]:
            raise _fail("size", size, "a shortest_edge resize followed by a square centre crop (do_center_crop)")
        if crop["height"] > size["shortest_edge"]:
            raise _fail("crop_size", crop, f"at most the shortest edge {size['shortest_edge']}")
        image_size, mode = (crop["height"], crop["width"]), "center"
        crop_pct = _pct_for(size["shortest_edge"], crop["height"])
    else:
        raise _fail("size", size, "{'height', 'width'} or {'shortest_edge'} (vitlab's resize has one target size)")
    mean: tuple[float, ...] = (0.0,) * channels
    std: tuple[float, ...] = (1.0,) * channels
    if get("do_normalize", True):
        given_mean = _floats(get("image_mean", _HF_STANDARD), "image_mean")
        given_std = _floats(get("image_std", _HF_STANDARD), "image_std")
        if given_mean is None or given_std is None:
            raise _fail("image_mean", None, "a mean and std when do_normalize")
        mean, std = given_mean, given_std
        if channels == 1 and len(mean) == 3 and len(set(mean)) == 1 and len(set(std)) == 1:
            mean, std = mean[:1], std[:1]  # a greyscale model under a processor's default (one value thrice)
    rescale = float(get("rescale_factor", 1 / 255)) if get("do_rescale", True) else 1.0
    if rescale * 255 != 1.0:  # x * rescale = (x / 255) * (255 * rescale): fold it into mean and std
        unit = 255 * rescale
        mean, std = tuple(m / unit for m in mean), tuple(s / unit for s in std)
    return cls(
        image_size=image_size,
        channels=channels,
        crop_pct=crop_pct,
        crop_mode=mode,
        interpolation=interpolation,
        mean=mean,
        std=std,
        resize_backend="tensor" if backend == "torchvision" else "pil",
        crop_rounding="floor",
    )
