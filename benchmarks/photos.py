"""Synthetic photo folders for the data-layer benchmarks: JPEGs of mixed sizes in class sub-folders.

    python benchmarks/photos.py ~/.cache/vitlab-bench/photos-10000 --n 10000
    python benchmarks/photos.py /tmp/photos --n 2000 --layout splits

Each image is a smooth colour gradient (four random corner colours, bilinear across the frame), a few
filled shapes (ellipses, rectangles, polygons; the class sets the base hue and the favoured shape), and
Gaussian noise, saved as an RGB JPEG at quality 90 with random width and height in ``sizes`` — so files
decode like photos of that size (~23 KB each at 224-320 px, texture and noise included) rather than flat colour fields.
Image ``i`` depends only on ``(seed, i)``; ``layout="flat"`` writes ``root/CLASS/NNNNNN.jpg``,
``"splits"`` writes ``root/train/CLASS/...`` and ``root/val/CLASS/...`` (every ``val_every``-th image of
each class in val, so both splits hold every class).
Generation runs in two processes and is cached: a folder whose ``.photos.json`` marker records the
same parameters is reused as it is.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

MARKER = ".photos.json"
VERSION = 2  # bump when the images a given set of parameters produces change


def class_name(c: int) -> str:
    return f"class{c:02d}"


def photo(i: int, classes: int, sizes: tuple[int, int], seed: int) -> tuple[int, Image.Image]:
    """Image ``i``: its class and the RGB picture (width, height drawn from ``sizes``, inclusive)."""
    rng = np.random.default_rng([seed, i])
    label = i % classes
    width, height = (int(v) for v in rng.integers(sizes[0], sizes[1] + 1, size=2))
    # a smooth gradient between four corner colours, hue centred on the class
    hue = label / classes
    base = np.array([np.cos(2 * np.pi * (hue + k / 3)) for k in range(3)]) * 80 + 128
    corners = np.clip(base + rng.normal(0, 50, size=(4, 3)), 0, 255)
    y = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]
    x = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    top = corners[0] * (1 - x) + corners[1] * x
    bottom = corners[2] * (1 - x) + corners[3] * x
    canvas = Image.fromarray((top * (1 - y) + bottom * y).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(canvas)
    for k in range(int(rng.integers(3, 8))):
        kind = label % 3 if k == 0 or rng.random() < 0.4 else int(rng.integers(0, 3))
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        r = rng.uniform(0.08, 0.35) * min(width, height)
        fill = tuple(int(v) for v in rng.integers(0, 256, size=3))
        if kind == 0:
            draw.ellipse((cx - r, cy - r * rng.uniform(0.5, 1.0), cx + r, cy + r), fill=fill)
        elif kind == 1:
            draw.rectangle((cx - r, cy - r * rng.uniform(0.4, 1.0), cx + r, cy + r), fill=fill)
        else:
            angles = np.sort(rng.uniform(0, 2 * np.pi, size=int(rng.integers(3, 7))))
            radii = r * rng.uniform(0.5, 1.0, size=angles.size)
            draw.polygon([(cx + a * np.cos(t), cy + a * np.sin(t)) for a, t in zip(radii, angles)], fill=fill)
    # texture: a coarse random field blown up smoothly (detail at a few pixels' scale), then fine noise
    coarse = rng.normal(0, 18, size=(height // 6 + 1, width // 6 + 1, 3)).astype(np.float32)
    texture = np.stack(
        [np.asarray(Image.fromarray(coarse[..., k], "F").resize((width, height), Image.BICUBIC)) for k in range(3)],
        axis=-1,
    )
    noise = rng.normal(0, 5, size=(height, width, 3)).astype(np.float32)
    pixels = np.asarray(canvas, dtype=np.float32) + texture + noise
    return label, Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def _write(job: tuple[str, list[tuple[int, str]], int, tuple[int, int], int]) -> int:
    root, items, classes, sizes, seed = job
    total = 0
    for i, split in items:
        label, image = photo(i, classes, sizes, seed)
        path = Path(root, split, class_name(label), f"{i:06d}.jpg")
        image.save(path, "JPEG", quality=90)
        total += path.stat().st_size
    return total


def make_photo_folder(
    root: str | Path,
    n: int,
    classes: int = 10,
    sizes: tuple[int, int] = (224, 320),
    seed: int = 0,
    layout: str = "flat",
    val_every: int = 5,
    processes: int = 2,
) -> Path:
    """Write ``n`` JPEG photos under ``root`` (or reuse them when its marker records these parameters).

    ``layout``: ``"flat"`` (``root/CLASS/*.jpg``) or ``"splits"`` (``root/train/CLASS``, ``root/val/CLASS``,
    every ``val_every``-th image of each class in val: stratified, whatever ``classes`` and ``val_every``).
    Returns ``root``. A folder without the marker, or with one for
    other parameters, is replaced only if it holds nothing but what this function wrote (its marker, class
    folders of ``.jpg`` files); anything else is refused.
    """
    if layout not in ("flat", "splits"):
        raise ValueError(f"layout must be 'flat' or 'splits', got {layout!r}")
    root = Path(root).expanduser()
    params = {
        "version": VERSION,
        "n": n,
        "classes": classes,
        "sizes": list(sizes),
        "seed": seed,
        "layout": layout,
        "val_every": val_every if layout == "splits" else None,
    }
    marker = root / MARKER
    if marker.exists():
        recorded = json.loads(marker.read_text())
        if recorded.get("params") == params:
            return root
        shutil.rmtree(root)
    elif root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} exists and was not written by make_photo_folder: choose another folder")
    splits = ["train", "val"] if layout == "splits" else [""]
    partial = root.with_name(f"{root.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    for split in splits:
        for c in range(classes):
            (partial / split / class_name(c)).mkdir(parents=True, exist_ok=True)

    def split_of(i: int) -> str:  # image i is the (i // classes)-th of its class (label = i % classes)
        return "" if layout == "flat" else ("val" if (i // classes) % val_every == val_every - 1 else "train")

    chunk = 250
    jobs = [
        (str(partial), [(i, split_of(i)) for i in range(s, min(s + chunk, n))], classes, tuple(sizes), seed)
        for s in range(0, n, chunk)
    ]
    start = time.perf_counter()
    if processes > 1:
        with mp.get_context("fork").Pool(processes) as pool:
            total = sum(pool.imap_unordered(_write, jobs))
    else:
        total = sum(map(_write, jobs))
    info = {"params": params, "bytes": total, "seconds": round(time.perf_counter() - start, 1)}
    (partial / MARKER).write_text(json.dumps(info, indent=1) + "\n")
    if root.exists():
        root.rmdir()  # empty (checked above)
    partial.rename(root)
    return root


def folder_info(root: str | Path) -> dict:
    """The marker of a folder :func:`make_photo_folder` wrote: its parameters, total bytes, seconds taken."""
    return json.loads((Path(root).expanduser() / MARKER).read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--sizes", type=int, nargs=2, default=(224, 320), metavar=("MIN", "MAX"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layout", choices=("flat", "splits"), default="flat")
    p.add_argument("--processes", type=int, default=2)
    args = p.parse_args()
    root = make_photo_folder(
        args.root, args.n, args.classes, tuple(args.sizes), args.seed, args.layout, processes=args.processes
    )
    print(json.dumps({"root": str(root), **folder_info(root)}))


if __name__ == "__main__":
    main()
