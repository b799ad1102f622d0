"""The ``wds`` photo source: WebDataset tar shards, indexed once and read by byte offset.

``--data-dir`` is a path, glob or brace pattern (``shards/train-{000000..000009}.tar``); samples are grouped
by key (``KEY.jpg``/``KEY.png``/... and ``KEY.cls``). Each shard is indexed once with the standard library's
``tarfile`` (member offsets and sizes, headers only) and an image is then read by offset: random access,
so the seeded order, rank sharding and resume work as for a folder, and no ``webdataset`` dependency.
Measured on a shard of 2,000 JPEGs (250-320 px): indexing and reading every image's bytes by offset took
0.36 s, ``webdataset``'s sequential reading of the same samples 0.45 s (both small beside decoding them,
about 1 ms an image). Validation and test shards are the same pattern with ``train`` replaced by ``val``
(``valid``, ``validation``) and ``test`` where such files exist. Records keep shards then members in order
within a class.
"""

from __future__ import annotations

import glob
import os
import re
import tarfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from .labels import records_from_values
from .records import Names, Progress, ProgressCounter, Records

WDS_IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp", "bmp")
WDS_LABEL_EXTENSIONS = ("cls", "cls.txt")


class TarStore:
    """Members of uncompressed tar shards, read by byte offset: ``shard[j]``, ``offset[j]``, ``size[j]``."""

    def __init__(self, shards: list[str], shard: np.ndarray, offset: np.ndarray, size: np.ndarray, members: Names):
        self.shards = shards
        self.shard = shard
        self.offset = offset
        self.size = size
        self.members = members

    def source(self, j: int) -> bytes:
        path = self.shards[int(self.shard[j])]
        try:
            with open(path, "rb") as f:
                f.seek(int(self.offset[j]))
                data = f.read(int(self.size[j]))
        except OSError as err:
            raise DataError(f"{self.name(j)}: cannot read the shard ({err.strerror or err})") from err
        if len(data) != int(self.size[j]):
            raise DataError(f"{self.name(j)}: the shard ends inside the member (truncated); fetch the shard again")
        return data

    def name(self, j: int) -> str:
        return f"{self.shards[int(self.shard[j])]}:{self.members[j]}"

    def key(self, j: int) -> str:
        return f"{Path(self.shards[int(self.shard[j])]).name}:{self.members[j]}"


def expand_braces(pattern: str) -> list[str]:
    """Bash-style brace expansion: ``a-{000..002}.tar`` -> three names (zero padding kept),
    ``{train,val}.tar`` -> two; several and nested braces expand left to right."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, body, tail = pattern[: match.start()], match.group(1), pattern[match.end() :]
    numeric = re.fullmatch(r"(-?\d+)\.\.(-?\d+)", body)
    if numeric:
        lo, hi = numeric.groups()
        width = len(lo) if lo.lstrip("-").startswith("0") and len(lo) > 1 else 0
        step = 1 if int(hi) >= int(lo) else -1
        options = [str(v).zfill(width) for v in range(int(lo), int(hi) + step, step)]
    elif "," in body:
        options = body.split(",")
    else:
        options = ["{" + body + "}"]  # not a brace expression: keep it literally
        return [head + options[0] + t for t in expand_braces(tail)]
    return [e for option in options for e in expand_braces(head + option + tail)]


def shard_paths(pattern: str, required: bool = True) -> list[Path]:
    """The shard files of ``pattern`` (braces expanded, then globbed), in order. ``required``: every
    expanded name must exist (else :class:`DataError` naming the first missing); otherwise the ones that do."""
    out: list[Path] = []
    names = expand_braces(str(pattern))
    missing = []
    for name in names:
        if glob.has_magic(name):
            out += [Path(p) for p in sorted(glob.glob(name))]
        elif Path(name).is_file():
            out.append(Path(name))
        else:
            missing.append(name)
    if required and missing:
        raise DataError(
            f"wds: {len(missing)} of the {len(names)} shards of {pattern} do not exist, the first {missing[0]}; "
            "check the --data-dir pattern"
        )
    return out


def read_wds_records(data_dir: str | Path, *, progress: Progress | None = None) -> dict[str, Records]:
    """WebDataset tar shards: a path, glob or brace pattern (or a folder of ``*.tar``); see the module
    docstring. Each shard is indexed once (headers only); images are read by offset."""
    pattern = os.path.expanduser(str(data_dir))
    if Path(pattern).is_dir():
        tars = sorted(p.name for p in Path(pattern).glob("*.tar"))
        pattern = str(Path(pattern) / ("train*.tar" if any(t.startswith("train") for t in tars) else "*.tar"))
    shards_by_split = {"train": shard_paths(pattern)}
    if not shards_by_split["train"]:
        raise DataError(f"wds: no shards match {pattern}; pass a .tar file, a glob or a brace pattern")
    if "train" in pattern:
        cut = pattern.rindex("train")
        for word, split in (("val", "val"), ("valid", "val"), ("validation", "val"), ("test", "test")):
            if split not in shards_by_split:
                found = shard_paths(pattern[:cut] + word + pattern[cut + 5 :], required=False)
                if found:
                    shards_by_split[split] = found
    shards: list[str] = []
    shard_of: list[int] = []
    offsets: list[int] = []
    sizes: list[int] = []
    members: list[str] = []
    refs: dict[str, list[int]] = {}
    values: dict[str, list[Any]] = {}
    counter = ProgressCounter(progress)
    for split, paths in shards_by_split.items():
        for path in paths:
            shards.append(str(path))
            for member, offset, size, label in _index_shard(path):
                refs.setdefault(split, []).append(len(members))
                values.setdefault(split, []).append(label)
                shard_of.append(len(shards) - 1)
                offsets.append(offset)
                sizes.append(size)
                members.append(member)
            counter.add(len(members) - counter.count)
    counter.done()
    store = TarStore(
        shards,
        np.asarray(shard_of, dtype=np.int32),
        np.asarray(offsets, dtype=np.int64),
        np.asarray(sizes, dtype=np.int64),
        Names(members),
    )
    return records_from_values(store, refs, values, pattern, "wds")


def _index_shard(path: Path) -> list[tuple[str, int, int, str]]:
    """``[(image member, data offset, size, cls text), ...]`` of one uncompressed tar shard, by key."""
    samples: dict[str, dict[str, tarfile.TarInfo]] = {}
    try:
        with tarfile.open(path, "r:") as tar:
            for info in tar:
                if not info.isfile():
                    continue
                folder, _, base = info.name.rpartition("/")
                stem, dot, ext = base.partition(".")
                if not dot or not stem:
                    continue
                samples.setdefault(f"{folder}/{stem}" if folder else stem, {})[ext.lower()] = info
            out = []
            for key, parts in samples.items():
                image = next((parts[e] for e in WDS_IMAGE_EXTENSIONS if e in parts), None)
                label = next((parts[e] for e in WDS_LABEL_EXTENSIONS if e in parts), None)
                if image is None and label is None:
                    continue
                if image is None or label is None:
                    lacks = "an image (jpg/png/webp/bmp)" if image is None else "a cls label"
                    raise DataError(f"wds: {path}: sample {key} has no {lacks}; every sample needs both")
                extracted = tar.extractfile(label)
                text = extracted.read().decode("utf-8").strip() if extracted is not None else ""
                if not text:
                    raise DataError(f"wds: {path}: {label.name} is empty; it must hold the class")
                out.append((image.name, image.offset_data, image.size, text))
    except (tarfile.TarError, OSError, EOFError, UnicodeDecodeError) as err:
        raise DataError(
            f"wds: {path}: not a readable uncompressed tar shard ({type(err).__name__}: {err}); "
            "shards must be plain .tar (gunzip .tar.gz ones)"
        ) from err
    return out
