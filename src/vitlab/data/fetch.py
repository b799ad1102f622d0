"""``download(name, to)``: fetch a dataset's official files and check their MD5 checksums.

The only network access in vitlab. The base URL can be replaced by a mirror (the ``mirror`` argument
or the ``VITLAB_DATA_MIRROR`` environment variable) serving the same file names. Files already present
with the right checksum are not fetched again, so files put in place by hand are verified (and CIFAR's
archive unpacked) offline. Each file is written to ``NAME.part`` and renamed only once its checksum
matches.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import urllib.request
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path

MIRROR_ENV = "VITLAB_DATA_MIRROR"


@dataclass(frozen=True)
class RemoteFiles:
    """Files (name -> MD5) under one base URL; ``extract``: unpack each (tar.gz) archive into the target."""
    base_url: str
    md5: dict[str, str]
    extract: bool = False


SOURCES: dict[str, RemoteFiles] = {
    "mnist": RemoteFiles("https://ossci-datasets.s3.amazonaws.com/mnist/", {
        "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
        "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
        "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
        "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
    }),
    "fashion-mnist": RemoteFiles("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/", {
        "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
        "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
        "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
        "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
    }),
    "cifar10": RemoteFiles("https://www.cs.toronto.edu/~kriz/", {
        "cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a",
    }, extract=True),
}


class DownloadError(RuntimeError):
    """The files could not be fetched (offline, server down); the message says how to get them by hand."""


def download(name: str, to: str | Path, mirror: str | None = None, timeout: float = 60.0) -> list[Path]:
    """Fetch dataset ``name``'s files into directory ``to`` and verify them; returns the file paths.

    ``timeout``: seconds to wait on the server per request.

    Raises ``ValueError`` for an unknown name or a checksum mismatch (naming the file) and
    :class:`DownloadError` when the server cannot be reached.
    """
    if name not in SOURCES:
        raise ValueError(f"no download for dataset {name!r}; downloadable: {list(SOURCES)}")
    source = SOURCES[name]
    base = (mirror or os.environ.get(MIRROR_ENV) or source.base_url).rstrip("/") + "/"
    to = Path(to)
    to.mkdir(parents=True, exist_ok=True)
    paths = []
    for filename, md5 in source.md5.items():
        target = to / filename
        if not (target.is_file() and _md5(target) == md5):
            _fetch(base + filename, target, md5, timeout, name, source, base)
        if source.extract:
            _unpack(target, to)
        paths.append(target)
    return paths


def _fetch(url: str, target: Path, md5: str, timeout: float, name: str, source: RemoteFiles, base: str) -> None:
    part = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, part.open("wb") as out:
            shutil.copyfileobj(response, out)
    except (OSError, HTTPException) as err:
        part.unlink(missing_ok=True)
        by_hand = ", ".join(source.md5)
        raise DownloadError(
            f"could not download {url} ({getattr(err, 'reason', err)}). Without network, fetch {by_hand} by "
            f"hand from {source.base_url} (or a mirror), put them in {target.parent} and rerun "
            f"`vitlab data download {name} --to {target.parent}` to verify them; or point --mirror / "
            f"{MIRROR_ENV} at a server that has them (tried {base})") from err
    got = _md5(part)
    if got != md5:
        part.unlink()
        raise ValueError(f"{target.name} from {url}: checksum mismatch (md5 {got}, expected {md5}); the file "
                         "is corrupt or not the official one: retry, or use another mirror")
    os.replace(part, target)


def _unpack(archive: Path, to: Path) -> None:
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(to, filter="data")
    except (tarfile.TarError, OSError, EOFError) as err:
        raise ValueError(f"{archive}: cannot unpack ({err}); delete it and download again") from err


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
