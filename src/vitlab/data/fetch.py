"""``download(name, to)``: fetch a dataset's official files and check their sizes and MD5 checksums.

The only network access in vitlab. The base URL can be replaced by a mirror (the ``mirror`` argument
or the ``VITLAB_DATA_MIRROR`` environment variable) serving the same file names. Files already present
with the right checksum are not fetched again, so files put in place by hand are verified (and CIFAR's
archive unpacked) offline.

Each file is written to ``NAME.part`` and renamed only once its checksum matches; a ``.part`` file is
removed on any failure, and one left by a killed run is removed when the next download starts. A file
must arrive within ``deadline`` seconds (a mirror trickling bytes is cut off), each read within
``timeout`` seconds, and reading stops as soon as a response exceeds the file's known size.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import time
import urllib.request
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path
from urllib.parse import urlparse

from ..errors import DataError, DownloadError
from .paths import data_home

MIRROR_ENV = "VITLAB_DATA_MIRROR"
TIMEOUT = 60.0
DEADLINE = 600.0
CHUNK = 1 << 16

__all__ = ["DEADLINE", "MIRROR_ENV", "SOURCES", "TIMEOUT", "DownloadError", "RemoteFile", "RemoteFiles", "download"]


@dataclass(frozen=True)
class RemoteFile:
    """One file's MD5 checksum and size in bytes."""

    md5: str
    size: int


@dataclass(frozen=True)
class RemoteFiles:
    """Files (name -> :class:`RemoteFile`) under one base URL; ``extract``: unpack each (tar.gz) archive."""

    base_url: str
    files: dict[str, RemoteFile]
    extract: bool = False


SOURCES: dict[str, RemoteFiles] = {
    "mnist": RemoteFiles(
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        {
            "train-images-idx3-ubyte.gz": RemoteFile("f68b3c2dcbeaaa9fbdd348bbdeb94873", 9_912_422),
            "train-labels-idx1-ubyte.gz": RemoteFile("d53e105ee54ea40749a09fcbcd1e9432", 28_881),
            "t10k-images-idx3-ubyte.gz": RemoteFile("9fb629c4189551a2d022fa330f9573f3", 1_648_877),
            "t10k-labels-idx1-ubyte.gz": RemoteFile("ec29112dd5afa0611ce80d1b7f02629c", 4_542),
        },
    ),
    "fashion-mnist": RemoteFiles(
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        {
            "train-images-idx3-ubyte.gz": RemoteFile("8d4fb7e6c68d591d4c3dfef9ec88bf0d", 26_421_880),
            "train-labels-idx1-ubyte.gz": RemoteFile("25c81989df183df01b3e8a0aad5dffbe", 29_515),
            "t10k-images-idx3-ubyte.gz": RemoteFile("bef4ecab320f06d8554ea6380940ec79", 4_422_102),
            "t10k-labels-idx1-ubyte.gz": RemoteFile("bb300cfdad3c16e7a12a480ee83cd310", 5_148),
        },
    ),
    "cifar10": RemoteFiles(
        "https://www.cs.toronto.edu/~kriz/",
        {
            "cifar-10-python.tar.gz": RemoteFile("c58f30108f718f92721af3b95e74349a", 170_498_071),
        },
        extract=True,
    ),
    "cifar100": RemoteFiles(
        "https://www.cs.toronto.edu/~kriz/",
        {
            "cifar-100-python.tar.gz": RemoteFile("eb9058c3a382ffc7106e4002c42a8d85", 169_001_437),
        },
        extract=True,
    ),
}


def download(
    name: str,
    to: str | Path | None = None,
    mirror: str | None = None,
    timeout: float = TIMEOUT,
    deadline: float = DEADLINE,
) -> list[Path]:
    """Fetch dataset ``name``'s files into folder ``to`` and verify them; returns the file paths.

    ``to`` defaults to ``data_home() / name`` (where :func:`~vitlab.data.load_dataset` looks).
    ``timeout``: seconds to wait on the server per read; ``deadline``: seconds for each whole file.

    Raises :class:`DataError` for an unknown name or a ``to`` that cannot be a folder, and
    :class:`DownloadError` when a file cannot be fetched, is too slow, too large or fails its checksum.
    """
    if name not in SOURCES:
        raise DataError(f"no download for dataset {name!r}; downloadable: {list(SOURCES)}")
    if timeout <= 0 or deadline <= 0:
        raise DataError(f"timeout and deadline must be > 0 seconds, got {timeout} and {deadline}")
    source = SOURCES[name]
    given = mirror or os.environ.get(MIRROR_ENV)
    if given:
        _check_mirror(given, "--mirror" if mirror else MIRROR_ENV)
    base = (given or source.base_url).rstrip("/") + "/"
    to = _make_folder(Path(to) if to is not None else data_home() / name)
    for filename in source.files:
        (to / f"{filename}.part").unlink(missing_ok=True)
    paths = []
    for filename, remote in source.files.items():
        target = to / filename
        if not (target.is_file() and _md5(target) == remote.md5):
            hint = (
                f"Without network, fetch {', '.join(source.files)} by hand from {source.base_url} (or a mirror), "
                f"put them in {to} and rerun `vitlab data download {name} --data-dir {to}` to verify them; "
                f"or point --mirror / {MIRROR_ENV} at a server that has them (tried {base})"
            )
            _fetch(base + filename, target, remote, timeout, deadline, hint)
        if source.extract:
            _unpack(target, to)
        paths.append(target)
    return paths


def _make_folder(to: Path) -> Path:
    try:
        to.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        blocking = next((p for p in (to, *to.parents) if p.exists() and not p.is_dir()), None)
        why = f"{blocking} is a file" if blocking is not None else err.strerror or str(err)
        raise DataError(f"cannot create the folder {to}: {why}; choose another --data-dir") from err
    return to


def _check_mirror(url: str, option: str) -> None:
    """Refuse a mirror that is not an http(s) URL with a host, or a file:/// URL, before anything is fetched."""
    parts = urlparse(url)
    if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.hostname):
        raise DataError(f"{option} {url!r} is not a URL: give a base URL such as https://host/path/ or file:///folder/")


def _fetch(url: str, target: Path, remote: RemoteFile, timeout: float, deadline: float, hint: str) -> None:
    """Stream ``url`` into ``target.part``, check it, rename it to ``target``; the part file never survives."""
    part = target.with_name(target.name + ".part")
    try:
        _stream(url, part, remote.size, timeout, deadline, hint)
        got = _md5(part)
        if got != remote.md5:
            raise DownloadError(
                f"{target.name} from {url}: checksum mismatch (md5 {got}, expected {remote.md5}); "
                "the file is corrupt or not the official one: retry, or use another mirror"
            )
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)


def _stream(url: str, part: Path, size: int, timeout: float, deadline: float, hint: str) -> None:
    end = time.monotonic() + deadline
    try:
        with urllib.request.urlopen(url, timeout=min(timeout, deadline)) as response, part.open("wb") as out:
            announced = response.headers.get("Content-Length", "")
            if announced.isdigit() and int(announced) > size:
                raise DownloadError(
                    f"{url} announces {int(announced):,} bytes, more than the {size:,} of the "
                    "official file: use another mirror"
                )
            received = 0
            while chunk := response.read1(CHUNK):
                received += len(chunk)
                if received > size:
                    raise DownloadError(
                        f"{url} sent more than the {size:,} bytes of the official file: use another mirror"
                    )
                out.write(chunk)
                if time.monotonic() > end:
                    raise DownloadError(
                        f"{url}: only {received:,} of {size:,} bytes arrived within the deadline "
                        f"of {deadline:g} s; retry, raise --deadline, or use another mirror"
                    )
    except DownloadError:
        raise
    except (OSError, HTTPException) as err:
        raise DownloadError(f"could not download {url} ({getattr(err, 'reason', None) or err}). {hint}") from err


def _unpack(archive: Path, to: Path) -> None:
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(to, filter="data")
    except (tarfile.TarError, OSError, EOFError) as err:
        raise DownloadError(f"{archive}: cannot unpack ({err}); delete it and download again") from err


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
