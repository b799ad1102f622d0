"""``vitlab data shard``: any photo source's splits written as WebDataset shards that ``--dataset wds`` reads.

Each split's images go, in their order, into ``SPLIT-000000.tar``, ``SPLIT-000001.tar``, ... of at most
``max_count`` samples and about ``max_size`` bytes (planned from the source sizes, so a re-run plans the same
shards). A sample is ``KEY.jpg|png|webp|bmp`` (the original bytes, or re-encoded at ``max_side``), ``KEY.cls``
(the class name) and, asked for, ``KEY.json`` (the source name and class). Shards are written by worker
processes to ``NAME.tar.partial`` and renamed when complete, so a re-run writes only the missing ones;
``shards.json`` lists every shard's samples, bytes and sha256.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from PIL import Image

from ..errors import DataError
from .preprocess import thumbnail
from .records import Records

MANIFEST = "shards.json"
TAR_BLOCK = 512
_EXTENSIONS = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp", "BMP": "bmp"}


def _source_bytes(records: Records, i: int) -> bytes:
    source = records.store.source(int(records.refs[i]))
    if isinstance(source, bytes):
        return source
    try:
        return Path(source).read_bytes()
    except OSError as err:
        raise DataError(f"{records.name(i)}: cannot read ({err.strerror or err})") from err


def _estimate(records: Records, i: int) -> int:
    """Item ``i``'s bytes in a shard (its image and ``.cls`` members with headers), read from the file size."""
    source = records.store.source(int(records.refs[i]))
    size = len(source) if isinstance(source, bytes) else os.path.getsize(source)
    return 3 * TAR_BLOCK + -(-size // TAR_BLOCK) * TAR_BLOCK


def plan_shards(records: Records, max_count: int | None, max_size: int | None) -> list[list[int]]:
    """The items of each shard, in order: a new shard starts when ``max_count`` items or ``max_size`` bytes
    would be passed (a single larger item gets a shard of its own)."""
    shards: list[list[int]] = [[]]
    size = 0
    for i in range(len(records)):
        grow = _estimate(records, i) if max_size else 0
        full = shards[-1] and ((max_count and len(shards[-1]) >= max_count) or (max_size and size + grow > max_size))
        if full:
            shards.append([])
            size = 0
        shards[-1].append(i)
        size += grow
    return shards if shards[-1] else []


def _image_member(records: Records, i: int, max_side: int | None) -> tuple[str, bytes]:
    """``(extension, bytes)`` of item ``i``: the original bytes, or decoded and re-encoded no larger than
    ``max_side`` pixels a side (JPEG stays JPEG at quality 95, anything else becomes PNG)."""
    data = _source_bytes(records, i)
    image = records.open(i)
    fmt = Image.open(io.BytesIO(data)).format or ""
    if max_side is None and fmt in _EXTENSIONS:
        return _EXTENSIONS[fmt], data
    if max_side is not None and max(image.size) > max_side:
        image = thumbnail(image, max_side)
    out = io.BytesIO()
    if fmt == "JPEG":
        image.convert("RGB").save(out, "JPEG", quality=95)
        return "jpg", out.getvalue()
    image.save(out, "PNG")
    return "png", out.getvalue()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


def write_shard(records: Records, path: Path, first: int, max_side: int | None, with_json: bool) -> dict[str, Any]:
    """``records`` (one shard's items; keys count from ``first``) written to ``path`` through a ``.partial``
    file renamed when complete: ``{"name", "count", "bytes", "sha256"}``."""
    partial = path.with_name(path.name + ".partial")
    with tarfile.open(partial, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(len(records)):
            key = f"{first + i:08d}"
            ext, data = _image_member(records, i, max_side)
            label = records.classes[int(records.labels[i])]
            _add(tar, f"{key}.{ext}", data)
            _add(tar, f"{key}.cls", label.encode())
            if with_json:
                _add(tar, f"{key}.json", json.dumps({"source": records.key(i), "class": label}).encode())
    os.replace(partial, path)
    return _entry(path, len(records))


def _entry(path: Path, count: int) -> dict[str, Any]:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"name": path.name, "count": count, "bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def _finished(path: Path, count: int) -> dict[str, Any]:
    """The manifest entry of a shard a previous run completed; :class:`DataError` when ``path`` is not one."""
    try:
        with tarfile.open(path, "r:") as tar:
            keys = {m.name.partition(".")[0] for m in tar}
    except (tarfile.TarError, OSError) as err:
        raise DataError(f"{path} exists and is not a shard ({err}); pass --overwrite to replace it") from err
    if len(keys) != count:
        raise DataError(
            f"{path} exists with {len(keys)} samples where this plan has {count}; pass --overwrite to replace it "
            "or --out another folder"
        )
    return _entry(path, count)


def write_dataset_shards(
    splits: dict[str, Records],
    out: str | Path,
    *,
    max_count: int | None = None,
    max_size: int | None = None,
    max_side: int | None = None,
    with_json: bool = False,
    workers: int = 0,
    overwrite: bool = False,
    report: Callable[[str], None] = print,
) -> dict[str, Any]:
    """``splits`` written as shards in ``out`` (see the module docstring) and the manifest returned (also
    written to ``out/shards.json``). Finished shards of an earlier run are kept unless ``overwrite``."""
    if max_count is None and max_size is None:
        raise DataError("vitlab data shard needs --max-count N and/or --max-size BYTES (e.g. --max-count 1000)")
    for value, flag in ((max_count, "--max-count"), (max_size, "--max-size"), (max_side, "--max-side")):
        if value is not None and value < 1:
            raise DataError(f"{flag} {value} must be at least 1")
    out = Path(out).expanduser()
    manifest_path = out / MANIFEST
    if manifest_path.exists() and not overwrite:
        raise DataError(f"{manifest_path} exists: the shards are complete; pass --overwrite to write them again")
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"classes": next(iter(splits.values())).classes, "splits": {}}
    jobs = []
    for split, records in splits.items():
        plan = plan_shards(records, max_count, max_size)
        manifest["splits"][split] = [None] * len(plan)
        first = 0
        for k, items in enumerate(plan):
            path = out / f"{split}-{k:06d}.tar"
            if path.exists() and not overwrite:
                manifest["splits"][split][k] = _finished(path, len(items))
                report(f"kept {path} (finished earlier)")
            else:
                jobs.append((split, k, records.subset(items), path, first))
            first += len(items)
    if workers > 0 and len(jobs) > 1:
        with ProcessPoolExecutor(workers, mp_context=get_context("fork" if os.name == "posix" else "spawn")) as pool:
            futures = [(s, k, pool.submit(write_shard, r, p, f, max_side, with_json)) for s, k, r, p, f in jobs]
            results = [(s, k, future.result()) for s, k, future in futures]
    else:
        results = [(s, k, write_shard(r, p, f, max_side, with_json)) for s, k, r, p, f in jobs]
    for split, k, entry in results:
        manifest["splits"][split][k] = entry
        report(f"wrote {out / entry['name']} ({entry['count']} samples, {entry['bytes']:,} bytes)")
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest
