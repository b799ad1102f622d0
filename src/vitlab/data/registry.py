"""Datasets by name: ``load_dataset(name, data_dir, seed=..., rows=..., normalization=..., **options)``.

Every dataset is split by :func:`~vitlab.data.dataset.make_splits`'s rule: each class is shuffled with
``seed`` (default 0) and cut, so validation (and test, when made here) is a *stratified random* part,
fixed for a given seed, never a file's tail.

- ``digits``: scikit-learn's 1,797 8x8 digits (embedded), 70/15/15 train/val/test.
- ``synthetic``: generated shapes and textures, 70/15/15.
- ``mnist`` / ``fashion-mnist`` / ``cifar10`` / ``cifar100``: validation is 10% of the training file(s), the
  test split is the official test file. With only the test file (e.g. MNIST's t10k alone),
  validation is 20% of it and there is no test split. Their files are searched for as
  :mod:`vitlab.data.paths` says (``$VITLAB_DATA``, ``~/.cache/vitlab/data``, ``/usr/share/datasets``)
  unless ``data_dir`` is given.
- The photo sources (:mod:`vitlab.data.photo_sources`), read from ``data_dir`` through a
  :class:`~vitlab.data.preprocess.Preprocess` (default: 32x32 squashed, bilinear, RGB): ``folder`` (class
  sub-folders, or ``train/`` ``val/`` ``test/`` folders of them), ``manifest`` (a CSV or JSON list of
  ``path,label``), ``wds`` (WebDataset tar shards, a brace pattern), ``hf`` (a ``datasets`` folder or
  parquet files). Official splits are kept; without them 70/15/15 as above. ``loader="memory"`` decodes
  them into in-memory float32 splits, ``"stream"`` gives :class:`~vitlab.data.stream.StreamDataset` splits
  decoded on demand, ``"auto"`` streams when the decoded float32 images (``N*C*H*W*4`` bytes) would exceed
  :data:`MEMORY_LIMIT` or a quarter of the available memory (``splits.loader``, ``splits.loader_reason``).

``rows`` keeps ``rows`` images of the training pool: the first of a seeded stratified order of all the
images, so the subset keeps the class proportions, a smaller ``rows`` is nested in a larger one, and it
does not depend on the validation size. ``normalization`` is ``"standardize"`` (mean and std of the
kept training images) or ``"unit"`` (mean 0, std 1: pixels stay in [0, 1]).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DataError
from .cifar import locate_cifar10, locate_cifar100, read_cifar10, read_cifar100
from .dataset import NORMALIZATIONS, DataSplits, ImageDataset, Source, make_splits
from .digits import read_digits
from .mnist import locate_mnist, read_mnist
from .paths import existing_dir, install_hint, search_dirs
from .photo_sources import SOURCES, read_records
from .records import Records, split_records
from .synthetic import read_synthetic

if TYPE_CHECKING:
    from .preprocess import Preprocess
    from .stream import StreamDataset

LOADERS = ("auto", "memory", "stream")
MEMORY_LIMIT = 2 << 30
"""``loader="auto"`` streams a photo dataset whose decoded float32 images exceed this (2 GiB) or a quarter
of the available memory, whichever is less."""
DEFAULT_WORKERS = 2
PHOTO_OPTIONS = ("image_size", "channels", "hflip_ok")
HF_OPTIONS = ("image_column", "label_column")


@dataclass(frozen=True)
class DatasetEntry:
    """A reader ``(data_dir?, seed?, **options) -> Source``; ``locate(folder) -> Path | None`` finds its
    files in a folder (None: the reader takes ``data_dir`` as given, or reads no files)."""

    loader: Callable[..., Source] | None
    description: str
    locate: Callable[[Path], Path | None] | None = None


DATASETS: dict[str, DatasetEntry] = {
    "digits": DatasetEntry(read_digits, "scikit-learn's 1,797 real 8x8 handwritten digits (embedded)"),
    "mnist": DatasetEntry(
        partial(read_mnist, variant="mnist"), "MNIST 28x28 digits, IDX files", partial(locate_mnist, variant="mnist")
    ),
    "fashion-mnist": DatasetEntry(
        partial(read_mnist, variant="fashion-mnist"),
        "Fashion-MNIST 28x28 clothes, IDX files",
        partial(locate_mnist, variant="fashion-mnist"),
    ),
    "cifar10": DatasetEntry(read_cifar10, "CIFAR-10 32x32 colour photos, python batches", locate_cifar10),
    "cifar100": DatasetEntry(
        read_cifar100, "CIFAR-100 32x32 colour photos, 100 fine classes, python batches", locate_cifar100
    ),
    "folder": DatasetEntry(
        None, "class sub-folders of PNG/JPEG/WebP/BMP images, or train/ val/ test/ folders of them (--data-dir DIR)"
    ),
    "manifest": DatasetEntry(None, "a CSV or JSON list of image paths and labels (--data-dir FILE)"),
    "wds": DatasetEntry(None, "WebDataset tar shards of jpg/png + cls members (--data-dir 'train-{000..009}.tar')"),
    "hf": DatasetEntry(None, "a Hugging Face datasets save_to_disk folder or parquet files (--data-dir DIR)"),
    "synthetic": DatasetEntry(read_synthetic, "generated shapes and textures (for tests)"),
}


def list_datasets() -> list[str]:
    """The names ``load_dataset`` accepts."""
    return list(DATASETS)


def describe_dataset(name: str) -> str:
    """One line about dataset ``name``: what it is and, for one that is searched for, where its files
    were found or how to get them."""
    entry = _entry(name)
    if entry.locate is None:
        return entry.description
    try:
        return f"{entry.description}; found in {locate_dataset(name)}"
    except DataError:
        return f"{entry.description}; not found: {install_hint(name)}"


def locate_dataset(name: str, data_dir: str | Path | None = None) -> Path | None:
    """The folder holding dataset ``name``'s files (searched as :mod:`vitlab.data.paths` says unless
    ``data_dir`` is given), or None for a dataset that reads no files.

    Raises :class:`DataError` when the files are not found (saying how to get them), when ``data_dir``
    does not exist, and when one is given for an embedded or generated dataset.
    """
    entry = _entry(name)
    if entry.loader is None:
        return _locate_photos(name, data_dir)
    if "data_dir" not in inspect.signature(entry.loader).parameters:
        if data_dir is not None:
            kind = "embedded" if name == "digits" else "generated"
            raise DataError(f"{name} is {kind}; it takes no --data-dir (got {data_dir})")
        return None
    if entry.locate is None:
        if data_dir is None:
            raise DataError(f"dataset {name!r} reads your files: pass data_dir (--data-dir DIR)")
        return existing_dir(data_dir, name)
    tried = search_dirs(name, data_dir)
    for folder in tried:
        found = entry.locate(folder)
        if found is not None:
            return found
    raise DataError(f"{name}: no files in {' or '.join(map(str, tried))}; {install_hint(name)}")


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
    **options: Any,
) -> DataSplits:
    """Load dataset ``name`` as splits: in memory, images ``(N, C, H, W)`` float32 in [0, 1], or streamed.

    ``options`` go to the dataset's reader (e.g. ``image_size`` for folder and synthetic); see the
    module docstring for where files are found, each dataset's split rule and what ``rows`` keeps.
    ``splits.source`` says where the images came from, ``splits.split_rule`` how they were split.

    For the photo sources (folder, manifest, wds, hf): ``preprocess`` says how a file becomes an image
    (the options ``image_size``, ``channels`` override its fields; ``hflip_ok=False`` when mirroring
    changes the class); ``loader`` is ``auto``, ``memory`` or ``stream`` (see the module docstring);
    ``workers`` decoding processes (default 2, at most the CPU count); ``max_bad`` unreadable images
    skipped (and recorded in each split's ``bad``) before :class:`DataError`; ``progress(count)`` hears
    the indexing of a large source. The other datasets are tensors in memory; they take none of these.
    """
    entry = _entry(name)
    if normalization not in NORMALIZATIONS:
        raise DataError(f"normalization {normalization!r} is unknown; choose one of {NORMALIZATIONS}")
    if loader not in LOADERS:
        raise DataError(f"loader {loader!r} is unknown; choose one of {LOADERS}")
    if entry.loader is None:
        return _load_photos(
            name, data_dir, seed, rows, normalization, preprocess, loader, workers, max_bad, progress, options
        )
    if preprocess is not None or loader == "stream":
        raise DataError(
            f"{name} is a tensor dataset held in memory at its own size; preprocess and loader='stream' are "
            f"for the photo sources ({', '.join(SOURCES)})"
        )
    params = dict(inspect.signature(entry.loader).parameters)
    fixed = {"data_dir", "seed", *getattr(entry.loader, "keywords", {})}
    unknown = sorted(set(options) - set(params) - fixed)
    if unknown:
        accepted = [p for p in params if p not in fixed]
        raise DataError(f"dataset {name!r} has no option(s) {unknown}; it accepts {accepted or 'none'}")
    folder = locate_dataset(name, data_dir)
    if folder is not None:
        options["data_dir"] = folder
    if "seed" in params:
        options["seed"] = seed
    splits = make_splits(name, entry.loader(**options), seed=seed, rows=rows, normalization=normalization)
    splits.loader_reason = f"{name} is a tensor dataset, held in memory"
    return splits


def _locate_photos(name: str, data_dir: str | Path | None) -> Path:
    """``data_dir`` of a photo source: a folder (folder), a file or folder (manifest, hf), a pattern (wds)."""
    if data_dir is None:
        raise DataError(f"dataset {name!r} reads your files: pass data_dir (--data-dir DIR)")
    if name == "folder":
        return existing_dir(data_dir, name)
    path = Path(data_dir).expanduser()
    if name != "wds" and not path.exists():
        raise DataError(f"--data-dir {path} does not exist; pass the {name} file or folder")
    return path


def _load_photos(
    name: str,
    data_dir: str | Path | None,
    seed: int,
    rows: int | None,
    normalization: str,
    preprocess: Preprocess | None,
    loader: str,
    workers: int | None,
    max_bad: int,
    progress: Callable[[int], None] | None,
    options: dict[str, Any],
) -> DataSplits:
    from .preprocess import Preprocess
    from .stream import StreamDataset, decode_records

    allowed = PHOTO_OPTIONS + (HF_OPTIONS if name == "hf" else ())
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise DataError(f"dataset {name!r} has no option(s) {unknown}; it accepts {list(allowed)}")
    if workers is None:
        workers = min(DEFAULT_WORKERS, os.cpu_count() or 1)
    if workers < 0 or max_bad < 0:
        raise DataError(f"workers and max_bad must be >= 0, got {workers} and {max_bad}")
    hflip_ok = bool(options.pop("hflip_ok", True))
    preprocess = _photo_preprocess(
        preprocess or Preprocess(), options.pop("image_size", None), options.pop("channels", None)
    )
    folder = _locate_photos(name, data_dir)
    records = read_records(name, folder, progress=progress, **options)
    train, val, test, rule = split_records(records, seed, rows, name=name)
    chosen, reason = choose_loader(loader, [train, val, test], preprocess)
    parts: list[Records | None] = [train, val, test]
    given = (preprocess.mean, preprocess.std) if preprocess.mean is not None and preprocess.std is not None else None
    data: list[ImageDataset | StreamDataset | None] = []
    bad: dict[str, str] = {}
    if chosen == "memory":
        for records_part in parts:
            if records_part is None:
                data.append(None)
                continue
            images, labels = decode_records(records_part, preprocess, workers=workers, max_bad=max_bad, bad=bad)
            data.append(ImageDataset(images, labels, records_part.classes))
    else:
        streams = [
            None
            if part is None
            else StreamDataset(part, preprocess, train=k == 0, hflip=hflip_ok, workers=workers, max_bad=max_bad)
            for k, part in enumerate(parts)
        ]
        for stream in streams:
            if stream is not None:
                stream.bad = bad  # one record of unreadable images for the whole dataset
        if given is None and streams[0] is not None:
            given = streams[0].statistics(normalization, workers=workers, max_bad=max_bad)
        data = list(streams)
    assert data[0] is not None and data[1] is not None
    if bad and chosen == "memory":
        names = list(bad)
        reason += f"; left out {len(names)} unreadable image(s): {', '.join(names[:3])}" + (
            " ..." if len(names) > 3 else ""
        )
    mean, std = given if given is not None else ((), ())
    return DataSplits(
        name,
        data[0],
        data[1],
        data[2],
        mean=tuple(mean),
        std=tuple(std),
        hflip_ok=hflip_ok,
        normalization=normalization,
        source=records["train"].origin,
        split_rule=rule,
        loader=chosen,
        loader_reason=reason,
        fingerprints={k: part.fingerprint() for k, part in zip(("train", "val", "test"), parts) if part is not None},
    )


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


def choose_loader(loader: str, parts: list[Records | None], preprocess: Preprocess) -> tuple[str, str]:
    """``(memory|stream, one-line reason)`` for ``parts`` read through ``preprocess`` (see the module docstring)."""
    count = sum(len(p) for p in parts if p is not None)
    channels, (height, width) = preprocess.channels, preprocess.image_size
    need = count * channels * height * width * 4
    size = f"{count:,} images at {channels}x{height}x{width} are {_gib(need)} as float32"
    if loader != "auto":
        return loader, f"{loader} as asked; {size}"
    available = available_memory()
    limit = min(MEMORY_LIMIT, available // 4)
    where = f"min(2 GiB, a quarter of the {_gib(available)} available)"
    if need > limit:
        return "stream", f"{size}, over {where}"
    return "memory", f"{size}, within {where}"


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 28 else f"{n / (1 << 20):.1f} MiB"


def _entry(name: str) -> DatasetEntry:
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; choose one of {list(DATASETS)}")
    return DATASETS[name]
