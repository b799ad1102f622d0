"""A registered dataset (:mod:`vitlab.data.registry`) read into splits: :func:`load_dataset` (classify),
:func:`load_dense_dataset` (dense), :func:`load_caption_dataset` (captions).

Every classification dataset is split by :func:`~vitlab.data.split.split_indices`' rule: each class is
shuffled with ``seed`` (default 0) and cut, so validation (and test, when made here) is a *stratified random*
part, fixed for a given seed, never a file's tail.

- ``digits``: scikit-learn's 1,797 8x8 digits (embedded), 70/15/15 train/val/test.
- ``synthetic``: generated shapes and textures, 70/15/15.
- ``mnist`` / ``fashion-mnist`` / ``cifar10`` / ``cifar100``: validation is 10% of the training file(s), the
  test split is the official test file. With only the test file (e.g. MNIST's t10k alone),
  validation is 20% of it and there is no test split. Their files are searched for as
  :mod:`vitlab.data.paths` says (``$VITLAB_DATA``, ``~/.cache/vitlab/data``, ``/usr/share/datasets``)
  unless ``data_dir`` is given.
- The photo sources (``folder``, ``manifest``, ``wds``, ``hf``), read from ``data_dir`` through a
  :class:`~vitlab.data.preprocess.Preprocess` (default: 32x32 squashed, bilinear, RGB). Official splits
  are kept; without them 70/15/15 as above. ``loader="memory"`` holds them in memory as uint8 splits at the
  model's size (:class:`~vitlab.data.memory.DecodedSplit`), each decoded in the DataLoader workers the first
  time its images are used, so a command that scores one split never decodes another; ``"stream"`` gives
  :class:`~vitlab.data.stream.StreamDataset` splits decoded on demand; ``"auto"`` chooses by the work: it
  streams when the decoded images (``N*C*H*W`` bytes) would exceed :data:`MEMORY_LIMIT` or an eighth of the
  available memory, and when ``epochs`` says each image is read once (decoding into memory first saves
  nothing then, and holds every image), else holds them in memory (``splits.loader``,
  ``splits.loader_reason``); ``"memory"`` is refused, before anything is decoded, when they would exceed
  half of the available memory.

``rows`` keeps ``rows`` images of the training pool: the first of a seeded stratified order of all the
images, so the subset keeps the class proportions, a smaller ``rows`` is nested in a larger one, and it
does not depend on the validation size. ``normalization`` is ``"standardize"`` (mean and std of the
kept training images) or ``"unit"`` (mean 0, std 1: pixels stay in [0, 1]).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, DataError
from .dataset import NORMALIZATIONS, DataSplits, make_splits
from .memory import DecodedSplit
from .options import LOADERS
from .preprocess import Preprocess
from .records import Records, split_records
from .registry import DatasetSpec, dataset_spec, locate_dataset, photo_sources
from .stream import StreamDataset

if TYPE_CHECKING:
    from .captions import CaptionSplits
    from .dense import DenseSplits

MEMORY_LIMIT = 512 << 20
"""``loader="auto"`` streams a photo dataset whose decoded uint8 images exceed this (512 MiB: 3,566 images at
3x224x224) or an eighth of the available memory, whichever is less."""
DEFAULT_WORKERS = 2


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    *,
    seed: int = 0,
    rows: int | None = None,
    normalization: str = "standardize",
    preprocess: Preprocess | None = None,
    loader: str = "auto",
    workers: int | None = None,
    max_bad: int = 0,
    progress: Callable[[int], None] | None = None,
    epochs: int | None = None,
    decode: str = "cpu",
    **options: Any,
) -> DataSplits:
    """Load classification dataset ``name`` as splits: in memory, images ``(N, C, H, W)`` float32 in [0, 1]
    (photos: uint8), or streamed.

    ``options`` go to the dataset's reader (e.g. ``image_size`` for folder and synthetic); see the
    module docstring for where files are found, each dataset's split rule and what ``rows`` keeps.
    ``splits.source`` says where the images came from, ``splits.split_rule`` how they were split.

    For the photo sources (folder, manifest, wds, hf): ``preprocess`` says how a file becomes an image
    (the options ``image_size``, ``channels`` override its fields; ``hflip_ok=False`` when mirroring
    changes the class); ``loader`` is ``auto``, ``memory`` or ``stream`` (see the module docstring), ``auto``
    weighing ``epochs``, how many times the run reads each image (None: not known, chosen by size alone);
    ``workers`` decoding processes (default 2, at most the CPU count); ``max_bad`` unreadable images
    skipped (and recorded in each split's ``bad``; in memory, every split is then decoded at once to count
    them) before :class:`DataError`; ``progress(count)`` hears the indexing of a large source; ``decode``
    where a streamed split's JPEGs are decoded (:data:`~vitlab.data.stream.DECODES`). The other
    datasets are tensors in memory; they take none of these.
    """
    spec = dataset_spec(name)
    if normalization not in NORMALIZATIONS:
        raise DataError(f"normalization {normalization!r} is unknown; choose one of {NORMALIZATIONS}")
    if loader not in LOADERS:
        raise DataError(f"loader {loader!r} is unknown; choose one of {LOADERS}")
    _check_options(spec, options)
    if spec.streams:
        read = PhotoRead(
            spec, data_dir, seed, rows, normalization, preprocess, loader, workers, max_bad, progress, epochs, decode
        )
        return read.splits(options)
    if preprocess is not None or loader == "stream":
        raise DataError(
            f"{name} is a tensor dataset held in memory at its own size; preprocess and loader='stream' are "
            f"for the photo sources ({', '.join(photo_sources())})"
        )
    params = inspect.signature(spec.reader).parameters
    folder = locate_dataset(name, data_dir)
    if folder is not None:
        options["data_dir"] = folder
    if "seed" in params:
        options["seed"] = seed
    splits = make_splits(name, spec.reader(**options), seed=seed, rows=rows, normalization=normalization)
    splits.loader_reason = f"{name} is a tensor dataset, held in memory"
    return splits


def load_dense_dataset(
    name: str,
    data_dir: str | Path | None = None,
    *,
    seed: int = 0,
    rows: int | None = None,
    image_size: int = 64,
    count: int | None = None,
) -> DenseSplits:
    """Dense splits of ``name`` (``shapes``: ``count`` generated images, default
    :data:`~vitlab.data.shapes.SHAPES_COUNT`; ``mask-folder``: ``data_dir`` with images/ and masks/; ``coco``:
    ``data_dir`` = the annotation JSON), images of ``image_size`` pixels a side, split 70/15/15 with ``seed``.
    ``rows`` keeps the first ``rows`` training images."""
    spec = dataset_spec(name, "dense")
    folder = locate_dataset(name, data_dir, "dense")
    sized: dict[str, Any] = {"image_size": image_size, "seed": seed}
    if count is not None and "count" in spec.options:
        sized["count"] = count
    splits = spec.reader(*([] if folder is None else [folder]), **sized)
    if rows is not None:
        if not 1 <= rows <= len(splits.train):
            raise DataError(f"rows={rows} but the training split has {len(splits.train)} images")
        splits.train = splits.train.subset(list(range(rows)))
    return splits


def load_caption_dataset(name: str, *, seed: int = 0, **options: Any) -> CaptionSplits:
    """Captioned splits of ``name`` (``shapes``: ``count`` generated scenes of ``image_size`` pixels, a share
    ``plain`` of captions naming no colours), split with ``seed``."""
    spec = dataset_spec(name, "captions")
    _check_options(spec, options)
    return spec.reader(seed=seed, **options)


def _check_options(spec: DatasetSpec, options: dict[str, Any]) -> None:
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        raise DataError(f"dataset {spec.name!r} has no option(s) {unknown}; it accepts {list(spec.options) or 'none'}")


@dataclass
class PhotoRead:
    """How :func:`load_dataset` reads a photo source: the ``spec``, where (``data_dir``), the split (``seed``,
    ``rows``, ``normalization``), how a file becomes an image (``preprocess``), the ``loader`` asked for, the
    decoding ``workers``, the unreadable images tolerated (``max_bad``), who hears the indexing (``progress``)
    and how many times the run reads each image (``epochs``, None: not known)."""

    spec: DatasetSpec
    data_dir: str | Path | None
    seed: int = 0
    rows: int | None = None
    normalization: str = "standardize"
    preprocess: Preprocess | None = None
    loader: str = "auto"
    workers: int | None = None
    max_bad: int = 0
    progress: Callable[[int], None] | None = None
    epochs: int | None = None
    decode: str = "cpu"
    """Where a streamed split's JPEGs are decoded (:data:`~vitlab.data.stream.DECODES`)."""
    bad: dict[str, str] = field(default_factory=dict)
    """Every unreadable image met, by name (one record for the whole dataset)."""

    def splits(self, options: dict[str, Any]) -> DataSplits:
        """The splits, each split's images held in memory or streamed (see the module docstring); reader
        ``options`` beyond the photo ones go to the source's reader."""
        workers = min(DEFAULT_WORKERS, os.cpu_count() or 1) if self.workers is None else self.workers
        if workers < 0 or self.max_bad < 0:
            raise DataError(f"workers and max_bad must be >= 0, got {workers} and {self.max_bad}")
        hflip_ok = bool(options.pop("hflip_ok", True))
        preprocess = _photo_preprocess(
            self.preprocess or Preprocess(), options.pop("image_size", None), options.pop("channels", None)
        )
        name = self.spec.name
        remote = "://" in str(self.data_dir)  # shards at URLs: the source checks them, no path to locate
        path = str(self.data_dir) if remote else locate_dataset(name, self.data_dir)
        assert path is not None  # a photo source reads the user's files
        records = self.spec.reader(path, progress=self.progress, **options)
        train, val, test, rule = split_records(records, self.seed, self.rows, name=name)
        parts: list[Records | None] = [train, val, test]
        chosen, reason = choose_loader(self.loader, parts, preprocess, self.epochs)
        given = (
            (preprocess.mean, preprocess.std) if preprocess.mean is not None and preprocess.std is not None else None
        )
        if chosen == "memory":
            data: list[DecodedSplit | StreamDataset | None] = [
                self._decoded(part, preprocess, workers) for part in parts
            ]
            if self.bad:
                names = list(self.bad)
                reason += f"; left out {len(names)} unreadable image(s): {', '.join(names[:3])}" + (
                    " ..." if len(names) > 3 else ""
                )
        else:
            data = [self._stream(part, k == 0, preprocess, workers, hflip_ok) for k, part in enumerate(parts)]
            train_stream = data[0]
            if given is None and isinstance(train_stream, StreamDataset):
                given = train_stream.statistics(self.normalization, workers=workers, max_bad=self.max_bad)
        assert data[0] is not None and data[1] is not None
        mean, std = given if given is not None else ((), ())
        return DataSplits(
            name,
            data[0],
            data[1],
            data[2],
            mean=tuple(mean),
            std=tuple(std),
            hflip_ok=hflip_ok,
            normalization=self.normalization,
            source=records["train"].origin,
            split_rule=rule,
            loader=chosen,
            loader_reason=reason,
            fingerprints={k: p.fingerprint() for k, p in zip(("train", "val", "test"), parts) if p is not None},
        )

    def _decoded(self, part: Records | None, preprocess: Preprocess, workers: int) -> DecodedSplit | None:
        """``part`` held in memory, decoded when first used; at once when unreadable images are tolerated
        (their count changes the split's size)."""
        if part is None:
            return None
        split = DecodedSplit(part, preprocess, workers=workers, max_bad=self.max_bad, bad=self.bad)
        if self.max_bad:
            split.decode()
        return split

    def _stream(
        self, part: Records | None, train: bool, preprocess: Preprocess, workers: int, hflip_ok: bool
    ) -> StreamDataset | None:
        if part is None:
            return None
        stream = StreamDataset(
            part, preprocess, train=train, hflip=hflip_ok, workers=workers, max_bad=self.max_bad, decode=self.decode
        )
        stream.bad = self.bad
        return stream


def _photo_preprocess(base: Preprocess, image_size: Any, channels: Any) -> Preprocess:
    """``base`` with the reader options ``image_size`` (an int: a square) and ``channels`` applied."""
    if image_size is None and channels is None:
        return base
    size = base.image_size if image_size is None else image_size
    pair = (size, size) if isinstance(size, int) else tuple(size)
    chans = base.channels if channels is None else channels
    if chans not in (1, 3) or not all(isinstance(s, int) and s >= 1 for s in pair):
        raise DataError(f"channels must be 1 or 3 and image_size >= 1, got {chans} and {image_size}")
    if chans != base.channels and base.mean is not None:
        base = replace(base, mean=None, std=None)
    return replace(base, image_size=pair, channels=chans)


def available_memory() -> int:
    """Bytes of memory available to this process: ``MemAvailable`` (``/proc/meminfo``) capped by a cgroup
    limit, else what ``sysconf`` says, else 8 GiB."""
    available = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            available = 8 << 30
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        if limit != "max":
            available = min(available, max(int(limit) - used, 0))
    except (OSError, ValueError):
        pass
    return int(available)


def choose_loader(
    loader: str, parts: list[Records | None], preprocess: Preprocess, epochs: int | None = None
) -> tuple[str, str]:
    """``(memory|stream, one-line reason)`` for ``parts`` read through ``preprocess``, each image ``epochs`` times
    (None: not known; see the module docstring)."""
    count = sum(len(p) for p in parts if p is not None)
    channels, (height, width) = preprocess.channels, preprocess.image_size
    need = count * channels * height * width
    size = f"{count:,} images at {channels}x{height}x{width} are {_gib(need)} as uint8"
    if loader == "stream":
        return loader, f"{loader} as asked; {size}"
    available = available_memory()
    if loader == "memory":
        if need > available // 2:
            raise ConfigError(
                f"--loader memory: {size}, over half of the {_gib(available)} available; use --loader stream "
                f"(or auto) or a smaller --image-size"
            )
        return loader, f"{loader} as asked; {size}"
    limit = min(MEMORY_LIMIT, available // 8)
    where = f"min({_gib(MEMORY_LIMIT)}, an eighth of the {_gib(available)} available)"
    if need > limit:
        return "stream", f"{size}, over {where}"
    if epochs is not None and epochs <= 1:
        return "stream", f"{size}; 1 epoch reads each image once: decoding them all into memory first saves nothing"
    if epochs is None:
        return "memory", f"{size}, within {where}"
    return "memory", f"{size}, within {where}; {epochs} epochs read each image {epochs} times: decoded once"


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 28 else f"{n / (1 << 20):.1f} MiB"
