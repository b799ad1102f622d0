"""What a model needs from its input: :class:`DataConfig` (size, channels, mean/std, classes, resize and crop,
where the training data came from), recorded in every checkpoint, and :func:`pretrained_cfg`, the same as timm's
``pretrained_cfg``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from torch import nn

from ..data import DataSplits
from ..data.preprocess import Preprocess


@dataclass
class DataConfig:
    """What a model needs from its input: images ``(B, in_chans, *image_size)`` in [0, 1], then
    ``(x - mean) / std`` per channel; ``classes`` name the outputs. ``dataset`` / ``data_dir`` /
    ``seed`` / ``rows`` say where the training data came from (to rebuild its splits); ``splits`` what each
    split held (``{split: {"images", "fingerprint", "missing_classes"}}``, see
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


def pretrained_cfg(model: nn.Module, data: DataConfig) -> dict[str, Any]:
    """timm's ``pretrained_cfg`` for ``model`` fed as ``data`` says: input size, resize and crop
    (interpolation, crop_pct, crop_mode), mean, std, classes."""
    return {
        "input_size": (data.in_chans, *data.image_size),
        "mean": tuple(data.mean),
        "std": tuple(data.std),
        "num_classes": getattr(getattr(model, "config", None), "num_classes", len(data.classes)),
        "label_names": list(data.classes),
        "interpolation": data.interpolation,
        "crop_pct": data.crop_pct,
        "crop_mode": data.crop_mode,
    }
