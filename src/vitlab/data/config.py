"""What a model needs from its input, and the one object that builds it: :class:`DataConfig`.

A data config holds the image size, channels, resize and crop (``crop_pct``, ``crop_mode``,
``interpolation``), the per-channel mean/std and the class names, and where the training data came from. It is
recorded in every checkpoint, resolved once from the model's recorded config plus the user's
:class:`~vitlab.data.options.DataOptions` (:meth:`DataConfig.resolve`), and builds the model's input itself
(timm's ``resolve_data_config`` then ``create_transform``, as one object)::

    data = vitlab.load_checkpoint(RUN).data          # a DataConfig
    x = data.eval_transform()(data.load_image(path))  # float32 (C, H, W): exactly what evaluate feeds the model
    inputs = data.normalize(pixels)                  # uint8 or [0, 1] float (..., C, H, W) -> (x - mean) / std

The pixel work itself (resampling, cropping, ``(x - mean) / std``) is :mod:`vitlab.data.preprocess`'s; the
records for other libraries (timm's ``pretrained_cfg``, a Hugging Face ``preprocessor_config.json``) are
:meth:`DataConfig.pretrained_cfg` and :meth:`DataConfig.hf_processor`, each exact or refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from PIL import Image

from ..errors import ConfigError
from .image import decode_image
from .options import DataOptions
from .preprocess import PIL_CODES, Preprocess

if TYPE_CHECKING:
    from .dataset import DataSplits


@dataclass
class DataConfig:
    """What a model needs from its input: images ``(B, in_chans, *image_size)`` in [0, 1], then
    ``(x - mean) / std`` per channel; ``classes`` name the outputs. ``dataset`` / ``data_dir`` /
    ``seed`` / ``rows`` say where the training data came from (to rebuild its splits); ``splits`` what each
    split held (``{split: {"images", "fingerprint", "missing_classes"[, "bytes"]}}``, see
    :meth:`~vitlab.data.DataSplits.identity`; empty in files written before it). ``crop_pct``,
    ``crop_mode``, ``interpolation``, ``resize_backend`` and ``crop_rounding`` say how a photo is resized
    and cropped to ``image_size`` (:meth:`preprocess`); their defaults are vitlab's first pipeline (a
    bilinear resize of the whole image to the square), which files written without them used."""

    image_size: tuple[int, int]
    in_chans: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    classes: list[str] = field(default_factory=list)
    normalization: str = "standardize"
    dataset: str | None = None
    data_dir: str | None = None
    seed: int = 0
    rows: int | None = None
    crop_pct: float = 1.0
    crop_mode: str = "squash"
    interpolation: str = "bilinear"
    resize_backend: str = "pil"
    crop_rounding: str = "round"
    splits: dict[str, Any] = field(default_factory=dict)

    def preprocess(self) -> Preprocess:
        """How one decoded image becomes this model's input (uint8; normalise with ``mean`` / ``std``)."""
        return Preprocess(
            image_size=tuple(self.image_size),  # type: ignore[arg-type]
            channels=self.in_chans,
            crop_pct=self.crop_pct,
            crop_mode=self.crop_mode,
            interpolation=self.interpolation,
            mean=tuple(self.mean) or None,
            std=tuple(self.std) or None,
            resize_backend=self.resize_backend,
            crop_rounding=self.crop_rounding,
        )

    def resolve(self, options: DataOptions | None = None) -> DataConfig:
        """This config with every field ``options`` (the user's ``--image-size`` / ``--set data.FIELD``) sets:
        the one place a model's recorded preprocessing meets the user's overrides."""
        if options is None:
            return self
        return self.with_preprocess(options.preprocess(self.preprocess()))

    # -- the model's input ------------------------------------------------------------------------------

    def load_image(self, source: str | Path | bytes) -> Image.Image:
        """An image file (or its bytes) through vitlab's one image door (16-bit scaled, a pixel budget checked
        from the header; a :class:`~vitlab.errors.DataError` naming the file otherwise), in this model's mode
        (``RGB`` or ``L``)."""
        return self.preprocess().convert(decode_image(source))

    def eval_pixels(self, image: Image.Image) -> torch.Tensor:
        """``image`` resized and cropped as evaluation reads it, before normalisation: uint8 ``(C, H, W)``."""
        return self.preprocess().eval_image(image)

    def eval_transform(self) -> Callable[[Image.Image], torch.Tensor]:
        """``image (PIL) -> float32 (C, H, W)``: the model's evaluation input, resize, crop and ``(x - mean) / std``
        exactly as ``vitlab evaluate`` feeds it (timm's ``create_transform(..., is_training=False)``)."""
        return self.preprocess().eval_input

    def train_transform(self, generator: torch.Generator, **crop: Any) -> Callable[[Image.Image], torch.Tensor]:
        """``image (PIL) -> float32 (C, H, W)``: a random resized crop (``crop``: ``scale``, ``ratio``, ``hflip``
        of :meth:`~vitlab.data.preprocess.Preprocess.train_image`) drawn from ``generator``, then normalised."""
        preprocess = self.preprocess()
        return lambda image: preprocess.train_input(image, generator, **crop)

    def normalize(self, pixels: torch.Tensor) -> torch.Tensor:
        """uint8 or float-in-[0, 1] pixels ``(..., C, H, W)`` -> the model's input ``(x - mean) / std``, float32."""
        return self.preprocess().normalize(pixels)

    def with_preprocess(self, preprocess: Preprocess) -> DataConfig:
        """A copy fed as ``preprocess`` says: its image size, channels, resize and crop, and its mean/std
        when it has them (else this config's)."""
        height, width = preprocess.image_size
        return replace(
            self,
            image_size=(height, width),
            in_chans=preprocess.channels,
            crop_pct=preprocess.crop_pct,
            crop_mode=preprocess.crop_mode,
            interpolation=preprocess.interpolation,
            resize_backend=preprocess.resize_backend,
            crop_rounding=preprocess.crop_rounding,
            mean=tuple(preprocess.mean) if preprocess.mean is not None else tuple(self.mean),
            std=tuple(preprocess.std) if preprocess.std is not None else tuple(self.std),
        )

    # -- the same pipeline in other libraries' words ----------------------------------------------------

    def pretrained_cfg(self, num_classes: int | None = None) -> dict[str, Any]:
        """timm's ``pretrained_cfg`` of a model fed as this config says: input size, resize and crop
        (interpolation, crop_pct, crop_mode), mean, std, classes. timm's ``resolve_data_config`` then
        ``create_transform`` computes :meth:`eval_transform` from it exactly when :meth:`exact_in` ``"timm"``."""
        return {
            "input_size": (self.in_chans, *self.image_size),
            "mean": tuple(self.mean),
            "std": tuple(self.std),
            "num_classes": len(self.classes) if num_classes is None else num_classes,
            "label_names": list(self.classes),
            "interpolation": self.interpolation,
            "crop_pct": self.crop_pct,
            "crop_mode": self.crop_mode,
        }

    def hf_processor(self) -> dict[str, Any]:
        """A Hugging Face ``preprocessor_config.json`` whose image processor, as ``AutoImageProcessor`` loads it,
        computes :meth:`eval_transform` exactly, or a :class:`ConfigError` saying why none does.

        timm's pipeline (PIL's resampling, torchvision's crop rounding: vitlab's own, a timm model's) is
        transformers' ``TimmWrapperImageProcessor`` of :meth:`pretrained_cfg` (timm's transforms, bit for bit;
        it needs timm installed). A Hugging Face model's pipeline (torchvision's resampling, a floored crop)
        is transformers' own ViT, DeiT or CLIP image processor, on its default torchvision backend."""
        self.exact_in("hf")
        pre = self.preprocess()
        if pre.resize_backend == "pil":
            cfg = {k: list(v) if isinstance(v, tuple) else v for k, v in self.pretrained_cfg().items()}
            return {"image_processor_type": "TimmWrapperImageProcessor", "pretrained_cfg": cfg}
        (height, width), (scale_h, scale_w) = pre.image_size, pre.scale_size
        out: dict[str, Any]
        if pre.crop_mode == "center":
            out = {"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": scale_h}}
        elif (scale_h, scale_w) == (height, width):
            out = {"image_processor_type": "ViTImageProcessor", "size": {"height": height, "width": width}}
        else:
            out = {"image_processor_type": "DeiTImageProcessor", "size": {"height": scale_h, "width": scale_w}}
        return out | {
            "do_resize": True,
            "resample": PIL_CODES[pre.interpolation],
            "do_center_crop": pre.crop_mode == "center" or (scale_h, scale_w) != (height, width),
            "crop_size": {"height": height, "width": width},
            "do_rescale": True,
            "rescale_factor": 1 / 255,
            "do_normalize": True,
            "image_mean": list(self.mean),
            "image_std": list(self.std),
            "do_convert_rgb": True,
        }

    def exact_in(self, target: str) -> None:
        """Nothing when ``target`` ("timm", "hf" or "onnx", whose metadata records vitlab's own fields) reproduces
        this pipeline pixel for pixel, else a :class:`ConfigError` naming what it cannot express and what can."""
        pre = self.preprocess()
        where = f"this model's preprocessing ({pre.describe()})"
        conventions = (pre.resize_backend, pre.crop_rounding)
        if target == "timm" and conventions != ("pil", "round"):
            raise ConfigError(
                f"{where} is a Hugging Face image processor's (torchvision's resampling, a floored crop margin), "
                f"which timm's create_transform does not reproduce exactly: export --to hf or --to onnx"
            )
        if target != "hf":
            return
        (height, width), (scale_h, scale_w) = pre.image_size, pre.scale_size
        if self.in_chans != 3:
            why = f"reads {self.in_chans}-channel images, where transformers' image processors give RGB"
        elif conventions not in (("pil", "round"), ("tensor", "floor")):
            why = (
                "mixes timm's and transformers' conventions (resampling by "
                f"{'PIL' if pre.resize_backend == 'pil' else 'torchvision'}, a crop margin "
                f"{'rounded' if pre.crop_rounding == 'round' else 'floored'}), which no image processor has"
            )
        elif conventions == ("pil", "round"):
            return
        elif pre.crop_mode == "border":
            why = "pads to keep the aspect ratio, which transformers' own image processors do not"
        elif pre.crop_mode == "center" and (height != width or scale_h != scale_w):
            why = "centre-crops a non-square size from a shortest-edge resize, which transformers cannot express"
        else:
            return
        raise ConfigError(f"{where} {why}: export --to onnx, which records it exactly")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "image_size": list(self.image_size), "mean": list(self.mean), "std": list(self.std)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DataConfig:
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        size = d.get("image_size", (0, 0))
        size = (size, size) if isinstance(size, int) else tuple(size)
        return cls(
            **{
                **d,
                "image_size": size,
                "mean": tuple(d.get("mean", ())),
                "std": tuple(d.get("std", ())),
                "classes": list(d.get("classes", [])),
                "splits": d.get("splits") if isinstance(d.get("splits"), dict) else {},
            }
        )

    @classmethod
    def raw_pixels(
        cls,
        size: int,
        classes: Sequence[str],
        dataset: str | None,
        data_dir: str | None = None,
        seed: int = 0,
        rows: int | None = None,
    ) -> DataConfig:
        """Square RGB images ``size x size`` fed in [0, 1] as they are (a model that normalises its own
        input: dense, promptable and CLIP models)."""
        return cls((size, size), 3, (0.0,) * 3, (1.0,) * 3, list(classes), "unit", dataset, data_dir, seed, rows)

    @classmethod
    def from_splits(
        cls, splits: DataSplits, *, data_dir: str | None = None, seed: int = 0, rows: int | None = None
    ) -> DataConfig:
        chans, height, width = splits.image_shape
        return cls(
            (height, width),
            chans,
            tuple(splits.mean),
            tuple(splits.std),
            list(splits.train.classes),
            getattr(splits, "normalization", "standardize"),
            splits.name,
            data_dir,
            seed,
            rows,
        )
