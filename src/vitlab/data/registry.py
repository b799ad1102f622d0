"""Every dataset vitlab reads, in one table of :class:`DatasetSpec`: its name, the target it feeds, its reader,
how its files are found, the options a user may set, and whether it is held in memory or can be streamed.

Targets: ``classify`` (images and one label each: :func:`~vitlab.data.load.load_dataset`), ``dense`` (images
with masks and boxes: :func:`~vitlab.data.load.load_dense_dataset`) and ``captions`` (images with captions:
:func:`~vitlab.data.load.load_caption_dataset`). A name is unique within its target (``shapes`` is both the
dense scenes and the captioned ones).

How a dataset finds its files (:attr:`DatasetSpec.reads`):

- ``embedded`` / ``generated``: no files (digits; synthetic, shapes); it takes no ``data_dir``.
- ``searched``: official files (MNIST, Fashion-MNIST, CIFAR) looked for in ``data_dir``, else where
  :mod:`vitlab.data.paths` says (``$VITLAB_DATA``, ``~/.cache/vitlab/data``, ``/usr/share/datasets``); the
  spec's ``locator(folder)`` says where in a folder they are (None: not there).
- ``given``: the user's own files at ``data_dir`` (a folder of images, a manifest, WebDataset shards, a Hugging
  Face dataset, a mask folder, a COCO JSON); ``locator(data_dir)`` checks it and returns the path to read.

Readers, by target: ``classify`` tensor sets ``(data_dir?, seed?, **options) -> Source``
(:class:`~vitlab.data.dataset.Source`, split by :func:`~vitlab.data.dataset.make_splits`); ``classify`` photo
sources ``(path, progress=, **options) -> {"train", "val"?, "test"?: Records}``
(:class:`~vitlab.data.records.Records`, indexed without decoding a pixel; see :mod:`vitlab.data.load` for how
they become splits); ``dense`` ``(path?, image_size=, seed=, count=?) -> DenseSplits``; ``captions``
``(count=, image_size=, seed=, plain=) -> CaptionSplits``. :func:`register_dataset` adds one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..errors import DataError
from .captions import load_caption_splits
from .cifar import locate_cifar10, locate_cifar100, read_cifar10, read_cifar100
from .dense import load_coco_boxes, load_mask_folder
from .digits import read_digits
from .folder_records import read_folder_records
from .hf_records import read_hf_records
from .manifest_records import read_manifest_records
from .mnist import locate_mnist, read_mnist
from .paths import existing_dir, install_hint, search_dirs
from .shapes import load_shapes_splits
from .synthetic import read_synthetic
from .wds_records import read_wds_records

TARGETS = ("classify", "dense", "captions")
READS = ("embedded", "generated", "searched", "given")
PHOTO_OPTIONS = ("image_size", "channels", "hflip_ok")
"""Options of every photo source: the side (or ``(H, W)``) and channels images are read at; ``hflip_ok=False``
when mirroring changes the class."""


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset: ``name`` (unique within ``target``: classify | dense | captions), its ``reader`` (see the
    module docstring), ``reads`` (embedded | generated | searched | given) and the ``locator`` that finds its
    files, the reader ``options`` a user may set, a one-line ``description``, ``streams`` (its images can be
    streamed from their files rather than held in memory) and what a dense dataset ``provides`` of
    ``masks``, ``boxes`` and ``instances``."""

    name: str
    target: str
    reader: Callable[..., Any]
    reads: str
    description: str
    locator: Callable[[Path], Path | None] | None = None
    options: tuple[str, ...] = ()
    streams: bool = False
    provides: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.target not in TARGETS or self.reads not in READS:
            raise DataError(
                f"dataset {self.name!r}: target {self.target!r} and reads {self.reads!r} must be one of "
                f"{TARGETS} and {READS}"
            )
        if (self.locator is None) != (self.reads in ("embedded", "generated")):
            raise DataError(
                f"dataset {self.name!r} reads {self.reads} files: give a locator exactly when it reads files"
            )

    @property
    def storage(self) -> str:
        """Where its images live while a run uses them: ``memory`` or ``memory or stream``."""
        return "memory or stream" if self.streams else "memory"


_SPECS: dict[tuple[str, str], DatasetSpec] = {}


def register_dataset(spec: DatasetSpec) -> DatasetSpec:
    """Add ``spec`` to the registry (refusing a second dataset of the same name and target)."""
    key = (spec.target, spec.name)
    if key in _SPECS:
        raise DataError(f"a {spec.target} dataset named {spec.name!r} is already registered")
    _SPECS[key] = spec
    return spec


def unregister_dataset(name: str, target: str = "classify") -> None:
    """Remove a dataset :func:`register_dataset` added (for plug-ins and tests)."""
    _SPECS.pop((target, name), None)


def dataset_specs(target: str | None = None) -> list[DatasetSpec]:
    """Every registered dataset (of ``target``), in the order registered."""
    return [spec for spec in _SPECS.values() if target in (None, spec.target)]


def list_datasets(target: str = "classify") -> list[str]:
    """The names of ``target``'s datasets (what ``load_dataset`` accepts for ``classify``)."""
    return [spec.name for spec in dataset_specs(target)]


def photo_sources() -> list[str]:
    """The classification datasets read from the user's image files, in memory or streamed."""
    return [spec.name for spec in dataset_specs("classify") if spec.streams]


def dataset_spec(name: str, target: str = "classify") -> DatasetSpec:
    """The spec of ``target``'s dataset ``name``; :class:`DataError` naming the choices when there is none."""
    spec = _SPECS.get((target, name))
    if spec is None:
        others = [s.target for s in dataset_specs() if s.name == name]
        elsewhere = f" ({name} is a {' and '.join(others)} dataset)" if others else ""
        kind = "" if target == "classify" else f"{target} "
        raise DataError(f"unknown {kind}dataset {name!r}{elsewhere}; choose one of {list_datasets(target)}")
    return spec


def locate_dataset(name: str, data_dir: str | Path | None = None, target: str = "classify") -> Path | None:
    """The path dataset ``name`` reads (searched as :mod:`vitlab.data.paths` says unless ``data_dir`` is
    given), or None for an embedded or generated one.

    Raises :class:`DataError` when the files are not found (saying how to get them), when ``data_dir``
    does not exist, when one is missing for the user's files, and when one is given for a dataset that
    reads no files.
    """
    spec = dataset_spec(name, target)
    if spec.locator is None:
        if data_dir is not None:
            raise DataError(f"{name} is {spec.reads}; it takes no --data-dir (got {data_dir})")
        return None
    if spec.reads == "given":
        if data_dir is None:
            raise DataError(f"dataset {name!r} reads your files: pass data_dir (--data-dir DIR)")
        return spec.locator(Path(data_dir).expanduser())
    tried = search_dirs(name, data_dir)
    for folder in tried:
        found = spec.locator(folder)
        if found is not None:
            return found
    raise DataError(f"{name}: no files in {' or '.join(map(str, tried))}; {install_hint(name)}")


def describe_dataset(name: str, target: str = "classify") -> str:
    """One line about dataset ``name``: what it is and, for one that is searched for, where its files
    were found or how to get them."""
    spec = dataset_spec(name, target)
    if spec.reads != "searched":
        return spec.description
    try:
        return f"{spec.description}; found in {locate_dataset(name, target=target)}"
    except DataError:
        return f"{spec.description}; not found: {install_hint(name)}"


def where_read(spec: DatasetSpec) -> str:
    """Where ``spec``'s images come from, in a few words: embedded, generated, the folder its official files
    were found in (or ``not found``), or the ``--data-dir`` the user gives."""
    if spec.reads in ("embedded", "generated"):
        return spec.reads
    if spec.reads == "given":
        return "--data-dir (your files)"
    try:
        return str(locate_dataset(spec.name, target=spec.target))
    except DataError:
        return f"not found (vitlab data download {spec.name})"


def read_records(name: str, data_dir: str | Path, *, progress: Any = None, **options: Any) -> dict[str, Any]:
    """Index photo source ``name`` at ``data_dir`` without decoding a pixel: ``{"train", "val"?, "test"?}``
    :class:`~vitlab.data.records.Records` (``options``: ``image_column``, ``label_column`` for ``hf``)."""
    spec = dataset_spec(name)
    if not spec.streams:
        raise DataError(f"{name} is not a photo source; choose one of {photo_sources()}")
    return spec.reader(data_dir, progress=progress, **options)


def _existing(what: str, path: Path) -> Path:
    if not path.exists():
        raise DataError(f"--data-dir {path} does not exist; pass the {what}")
    return path


def _pattern(path: Path) -> Path:
    """A WebDataset path, glob or brace pattern: checked when its shards are listed."""
    return path


def _mnist_spec(variant: str, description: str) -> DatasetSpec:
    """A dataset in MNIST's IDX files, searched for under its ``variant``'s file names."""
    read, locate = partial(read_mnist, variant=variant), partial(locate_mnist, variant=variant)
    return DatasetSpec(variant, "classify", read, "searched", description, locate)


for _spec in (
    DatasetSpec(
        "digits", "classify", read_digits, "embedded", "scikit-learn's 1,797 real 8x8 handwritten digits (embedded)"
    ),
    _mnist_spec("mnist", "MNIST 28x28 digits, IDX files"),
    _mnist_spec("fashion-mnist", "Fashion-MNIST 28x28 clothes, IDX files"),
    DatasetSpec(
        "cifar10", "classify", read_cifar10, "searched", "CIFAR-10 32x32 colour photos, python batches", locate_cifar10
    ),
    DatasetSpec(
        "cifar100",
        "classify",
        read_cifar100,
        "searched",
        "CIFAR-100 32x32 colour photos, 100 fine classes, python batches",
        locate_cifar100,
    ),
    DatasetSpec(
        "folder",
        "classify",
        read_folder_records,
        "given",
        "class sub-folders of PNG/JPEG/WebP/BMP images, or train/ val/ test/ folders of them (--data-dir DIR)",
        partial(existing_dir, name="folder"),
        PHOTO_OPTIONS,
        streams=True,
    ),
    DatasetSpec(
        "manifest",
        "classify",
        read_manifest_records,
        "given",
        "a CSV or JSON list of image paths and labels (--data-dir FILE)",
        partial(_existing, "manifest file or folder"),
        PHOTO_OPTIONS,
        streams=True,
    ),
    DatasetSpec(
        "wds",
        "classify",
        read_wds_records,
        "given",
        "WebDataset tar shards of jpg/png + cls members (--data-dir 'train-{000..009}.tar')",
        _pattern,
        PHOTO_OPTIONS,
        streams=True,
    ),
    DatasetSpec(
        "hf",
        "classify",
        read_hf_records,
        "given",
        "a Hugging Face datasets save_to_disk folder or parquet files (--data-dir DIR)",
        partial(_existing, "hf file or folder"),
        (*PHOTO_OPTIONS, "image_column", "label_column"),
        streams=True,
    ),
    DatasetSpec(
        "synthetic",
        "classify",
        read_synthetic,
        "generated",
        "generated shapes and textures (for tests)",
        options=("num_images", "image_size", "channels", "noise"),
    ),
    DatasetSpec(
        "shapes",
        "dense",
        load_shapes_splits,
        "generated",
        "generated scenes of circles, squares, triangles and bars with masks, boxes and instances",
        options=("count", "image_size"),
        provides=("masks", "boxes", "instances"),
    ),
    DatasetSpec(
        "mask-folder",
        "dense",
        load_mask_folder,
        "given",
        "images/NAME.png with masks/NAME.png of class ids (--data-dir DIR)",
        partial(existing_dir, name="mask-folder"),
        ("image_size",),
        provides=("masks", "boxes"),
    ),
    DatasetSpec(
        "coco",
        "dense",
        load_coco_boxes,
        "given",
        "COCO-style box annotations over a folder of images (--data-dir FILE.json)",
        partial(_existing, "COCO annotation JSON"),
        ("image_size",),
        provides=("boxes",),
    ),
    DatasetSpec(
        "shapes",
        "captions",
        load_caption_splits,
        "generated",
        "generated scenes of coloured shapes, each with a caption that says exactly what is drawn",
        options=("count", "image_size", "plain"),
    ),
):
    register_dataset(_spec)
