"""How a run reads its images: :class:`DataOptions`, the ``data`` field of a training config.

Every field is optional: ``None`` means the model's own: the preprocessing a model from elsewhere
records (``--init`` a timm or Hugging Face model: its size, crop, filter and mean/std), else the input
size the model is registered with, read as a squashed square. Tensor datasets (digits, MNIST,
Fashion-MNIST, CIFAR) keep their native size unless ``image_size`` is set. The command line sets the
fields with ``--image-size``, ``--loader`` and ``--set data.FIELD=VALUE``, and a checkpoint records the
resolved :class:`~vitlab.data.preprocess.Preprocess`, so evaluation feeds the model as training did.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..checks import Check, Float, Int, Maybe, OneOf, Pair, Seq, check_fields, reject_unknown
from ..errors import ConfigError
from .preprocess import CROP_MODES, INTERPOLATIONS, MAX_CROP_PCT, Preprocess
from .stream import DECODES

LOADERS = ("auto", "memory", "stream")
"""``memory``: every image decoded once into one tensor (image files: uint8 at the model's size, decoded in
``DataLoader`` workers); ``stream``: decoded on demand in ``DataLoader`` workers, uint8 batches normalised on the
device; ``auto``: ``stream`` for a run that reads each image once (one epoch) or a dataset that would not
comfortably fit in memory, else ``memory``."""


@dataclass
class DataOptions:
    """The data fields of a run (``--set data.FIELD=VALUE``; ``None``: the model's or dataset's own).

    image_size: the model's input side (or ``[height, width]``), e.g. 224 (``--image-size``).
    channels: 3 (RGB) or 1 (greyscale) for image files.
    crop_pct: evaluation resizes to ``image_size / crop_pct`` and centre-crops ``image_size`` (timm's rule).
    crop_mode: ``center`` (resize the shorter side), ``squash`` (both sides), ``border`` (keep the ratio, pad).
    interpolation: the resampling filter (``bilinear``, ``bicubic``, ...).
    mean / std: per-channel normalisation; ``None`` keeps the model's (fine-tuning) or the training images'.
    loader: ``auto``, ``memory`` or ``stream`` (see :data:`LOADERS`).
    workers: decoding processes of the stream (default: 2, at most the CPU count).
    max_bad_images: unreadable images a streamed run skips (counted and reported) before it refuses.
    decode: where a streamed split's JPEGs are decoded: ``cpu`` (PIL, in the workers) or ``gpu``: the workers
        send the bytes and each training crop (drawn on the CPU by the same function), the run's device decodes
        a batch at once (``torchvision.io.decode_jpeg``) and crops and resizes with torchvision's kernels, which
        agree with the CPU path's PIL filters to interpolation tolerance. On a CPU device ``gpu`` runs that same
        path with the CPU kernels. Other images (PNG, ...) are decoded in the workers; an in-memory split is
        decoded once, on the CPU, whatever this says.
    """

    image_size: int | tuple[int, int] | None = None
    channels: int | None = None
    crop_pct: float | None = None
    crop_mode: str | None = None
    interpolation: str | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    loader: str = "auto"
    workers: int | None = None
    max_bad_images: int = 0
    decode: str = "cpu"

    @staticmethod
    def checks() -> dict[str, Check]:
        return {
            "image_size": Maybe(Pair(Int(1, 8192))),
            "channels": Maybe(Int(1, 3)),
            "crop_pct": Maybe(Float(0.0, MAX_CROP_PCT, low_open=True)),
            "crop_mode": Maybe(OneOf(CROP_MODES)),
            "interpolation": Maybe(OneOf(INTERPOLATIONS)),
            "mean": Maybe(Seq(Float(-1e3, 1e3), 1, 4)),
            "std": Maybe(Seq(Float(0.0, 1e3, low_open=True), 1, 4)),
            "loader": OneOf(LOADERS),
            "workers": Maybe(Int(0, 64)),
            "max_bad_images": Int(0, 2**40),
            "decode": OneOf(DECODES),
        }

    def __post_init__(self) -> None:
        check_fields(self, self.checks())
        if self.channels == 2:
            raise ConfigError("data.channels must be 1 (greyscale) or 3 (RGB), got 2")
        if (self.mean is None) != (self.std is None):
            raise ConfigError("data.mean and data.std go together: set both (one value per channel) or neither")
        if self.mean is not None and self.std is not None and len(self.mean) != len(self.std):
            raise ConfigError(f"data.mean has {len(self.mean)} values but data.std {len(self.std)}: one per channel")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | DataOptions | None) -> DataOptions:
        """The options from a mapping (a run's ``config.json``, ``--set data.KEY``); unknown keys refused."""
        if d is None:
            return cls()
        if isinstance(d, DataOptions):
            return d
        if not isinstance(d, dict):
            raise ConfigError(
                f"data must be a mapping of data options, got {type(d).__name__}: e.g. {{'image_size': 224}}"
            )
        reject_unknown(d, [f.name for f in fields(cls)], "data")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def preprocess(self, base: Preprocess) -> Preprocess:
        """``base`` (the model's recorded preprocessing, or the dataset's default) with every field set here."""
        given: dict[str, Any] = {
            name: getattr(self, name)
            for name in ("channels", "crop_pct", "crop_mode", "interpolation", "mean", "std")
            if getattr(self, name) is not None
        }
        if self.image_size is not None:
            size = self.image_size
            given["image_size"] = (size, size) if isinstance(size, int) else tuple(size)
        if given.get("channels", base.channels) != base.channels and self.mean is None:
            given |= {"mean": None, "std": None}  # the base's statistics are for its own channels
        return replace(base, **given) if given else base

    @property
    def sets_size(self) -> bool:
        """True when the user fixed the image geometry (size, crop or filter)."""
        return any(getattr(self, n) is not None for n in ("image_size", "crop_pct", "crop_mode", "interpolation"))
