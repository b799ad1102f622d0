"""The streaming data layer on photos: loader speed against timm and the decode-only limit, and a train run's
peak memory and data wait.

    python benchmarks/bench_data.py                       # 10,000 photos, 2 workers, batch 64, everything
    python benchmarks/bench_data.py --only loader --images 2000 --seconds 3 --rounds 2   # a quick look
    python benchmarks/bench_data.py --only train --train-seconds 60

Photos are generated once by ``benchmarks/photos.py`` (JPEG quality 90, width and height each drawn from
224-320 px, 10 classes) under ``--cache`` (default ``~/.cache/vitlab-bench/photos-N``) and read once before
each measurement, so every peer reads them from the page cache (the development machine pages out file
pages unread for about a minute, so once at the start is not enough).

``loader``: images/s out of each loader, with the same work per image: decode (PIL), RandomResizedCrop
(scale 0.08-1, ratio 3/4-4/3, torchvision's rule) to 224 x 224 with PIL's bilinear filter, horizontal flip
with p 0.5, and normalisation with ImageNet's mean/std, ``--workers`` DataLoader processes, batches of
``--batch-size``, a random order of the whole folder; each peer's float batch is then read as a model's first
layer reads it (``read_by_the_model``: every page, so a batch handed over in shared memory is mapped into this
process, as a training step would map it):

- ``vitlab``: ``StreamDataset(read_records("folder", DIR)["train"], Preprocess(224, bilinear), train=True)``
  ``.batches(order, B, seed=..., workers=W)``: uint8 batches from the workers, then the engine's own
  ``as_pixels`` (into one ``BatchBuffer``, as the classification task keeps) + ``normalize_`` in this process
  (as ``vitlab train`` on CPU does).
- ``vitlab-decode-gpu``: the same with ``decode="gpu"`` (``--set data.decode=gpu``) on ``--device``: the workers
  send JPEG bytes and each image's crop box, this process decodes the batch with ``torchvision.io.decode_jpeg``
  on the device, crops and resizes there (torchvision's antialiased bilinear) and normalises (CUDA synchronised
  after each batch). On a CPU device it is the same path on the CPU kernels, in this one process.
- ``timm``: ``create_loader(create_dataset("", root=DIR), is_training=True, use_prefetcher=False, ...)``:
  timm's transforms (``RandomResizedCropAndInterpolation``, ``RandomHorizontalFlip``, ``ToTensor``,
  ``Normalize``) in the workers, float batches out; ``color_jitter=None``, no auto-augment, no erasing.
- ``timm-prefetch``: the same with ``use_prefetcher=True`` on the CPU: uint8 batches from the workers
  (``fast_collate``), normalised in this process by timm's ``PrefetchLoader``: vitlab's own design.
- ``decode-pil``: each file ``Image.open`` + ``convert("RGB")`` (which loads it) in the workers, nothing
  else returned; ``decode-tv``: ``torchvision.io.decode_jpeg(read_file(path), RGB)``. The faster of the
  two is the decode-only limit.

Each peer starts its loader, discards ``--warmup`` batches (worker start, first prefetch), then times
``--batches`` batches (default: what vitlab delivers in ``--seconds``, found by one untimed calibration
pass, the same count for every peer and round). ``--rounds`` rounds, the peers' order rotating each
round. Reported: images/s per round with min / median / max, each round's paired ratio vitlab / peer and
their median (the headline), and the CPU milliseconds per image this process and the workers spent in the
timed part (the workers' ``/proc/PID/stat``: a producer-bound loader's workers never idle, so this is their
cost per image whatever the machine's load; ``cpu_cost_ratio`` is the peer's total over vitlab's, what the
speed ratio would be on an otherwise idle CPU-bound machine).

``stages``: each stage's CPU milliseconds per image, one after another in this process with one thread:
where a worker's and the main process's time goes.

``train``: ``vitlab train --dataset folder --data-dir DIR --image-size 224 --loader stream --model
vit-tiny-patch16-224 --set time_limit_s=T --epochs 1 --batch-size 32 --quiet --device cpu`` as a
subprocess on ``--train-images`` photos (default 2,000 and 16,000), its process tree (the run and its
DataLoader workers) sampled from /proc: the summed RSS every 0.2 s (``status``), the summed PSS
(``smaps_rollup``: shared pages counted once; slow to read, so taken at each new high of the summed RSS, at
most once a second), each process's own peak RSS (``VmHWM``); the ratio of the largest folder's peak to the
smallest's (goal <= 1.1); and from the run's ``metrics.jsonl`` the fraction of the epoch the step waited for data
(``data_wait``, goal < 5%) and its images/s.

Prints one JSON object (progress on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from photos import folder_info, make_photo_folder  # noqa: E402

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)
PEERS = ("vitlab", "vitlab-decode-gpu", "timm", "timm-prefetch", "decode-pil", "decode-tv")
PARTS = ("loader", "stages", "train")
GOALS = {"vs_timm": 1.0, "vs_decode_limit": 0.8, "peak_memory_ratio": 1.1, "data_wait": 0.05}


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def photo_folder(cache: Path, n: int) -> Path:
    """The cached folder of ``n`` photos (made on first use)."""
    root = cache / f"photos-{n}"
    start = time.perf_counter()
    make_photo_folder(root, n)
    if time.perf_counter() - start > 1:
        log(f"generated {n} photos in {root} ({time.perf_counter() - start:.0f} s)")
    return root


def jpeg_paths(root: Path) -> list[str]:
    return sorted(str(p) for p in root.glob("*/*.jpg"))


def warm_page_cache(paths: list[str]) -> int:
    total = 0
    for path in paths:
        with open(path, "rb") as f:
            total += len(f.read())
    return total


# --- the peers: each yields the number of images of each batch, ready for the model --------------------


def read_by_the_model(inputs: torch.Tensor) -> float:
    """What a model's first layer does to a batch, at the least: read every page of it. A batch that crossed from
    a worker in shared memory is mapped into this process page by page on its first read; a loader whose
    batches were never read would not pay for that mapping here, and its consumer would in its first layer."""
    flat = inputs.reshape(-1)
    return float(flat[:: max(1, 4096 // flat.element_size())].sum())


def vitlab_stream(root: Path, args: argparse.Namespace, decode: str = "cpu") -> Callable[[int], Iterator[int]]:
    from vitlab.data import read_records
    from vitlab.data.preprocess import BatchBuffer, Preprocess, normalize_
    from vitlab.data.stream import StreamDataset
    from vitlab.tasks.classify.task import as_pixels

    device = torch.device(args.device if decode == "gpu" else "cpu")
    records = read_records("folder", root)["train"]
    preprocess = Preprocess(image_size=(224, 224), interpolation=args.interpolation)
    dataset = StreamDataset(records, preprocess, train=True, hflip=True, scale=SCALE, ratio=RATIO, decode=decode)
    dataset = dataset.on(device)
    mean, std = torch.tensor(IMAGENET_MEAN, device=device), torch.tensor(IMAGENET_STD, device=device)
    cuda = device.type == "cuda"
    pixels = BatchBuffer()  # as the classification task holds one

    def run(seed: int) -> Iterator[int]:
        order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))
        batches = dataset.batches(order, args.batch_size, seed=seed, workers=args.workers, pin_memory=cuda)
        try:
            for images, labels in batches:
                inputs = normalize_(as_pixels(images, device, pixels), mean, std)
                assert inputs.shape[1:] == (3, 224, 224) and inputs.dtype == torch.float32
                read_by_the_model(inputs)
                del inputs  # as a training step ends: its inputs go before the next batch comes
                if cuda:
                    torch.cuda.synchronize()
                yield len(labels)
        finally:
            batches.close()  # type: ignore[attr-defined]

    return run


def timm_loader(root: Path, args: argparse.Namespace, prefetch: bool) -> Callable[[int], Iterator[int]]:
    from timm.data import create_dataset, create_loader

    dataset = create_dataset("", root=str(root), is_training=True)

    def run(seed: int) -> Iterator[int]:
        torch.manual_seed(seed)  # the loader's shuffle and its workers' augmentation seeds
        loader = create_loader(
            dataset,
            input_size=(3, 224, 224),
            batch_size=args.batch_size,
            is_training=True,
            no_aug=False,
            scale=SCALE,
            ratio=RATIO,
            hflip=0.5,
            vflip=0.0,
            color_jitter=None,  # type: ignore[arg-type]  # no ColorJitter transform at all
            auto_augment=None,
            re_prob=0.0,
            interpolation=args.interpolation,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            num_workers=args.workers,
            use_prefetcher=prefetch,
            device=torch.device("cpu"),
            pin_memory=False,
            persistent_workers=False,
        )
        batches = iter(loader)
        try:
            for images, labels in batches:
                assert images.shape[1:] == (3, 224, 224) and images.dtype == torch.float32
                read_by_the_model(images)
                yield len(labels)
        finally:
            if hasattr(batches, "close"):  # PrefetchLoader's generator: closing it drops the DataLoader's iterator
                batches.close()
            else:
                batches._shutdown_workers()  # type: ignore[attr-defined]
            del batches

    return run


class DecodeFiles(Dataset):
    """Item ``i``: file ``paths[i]`` decoded to RGB and dropped (its width returned)."""

    def __init__(self, paths: list[str], how: str) -> None:
        self.paths, self.how = paths, how

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> int:
        if self.how == "pil":
            from PIL import Image

            with Image.open(self.paths[i]) as image:
                return image.convert("RGB").width
        from torchvision.io import ImageReadMode, decode_jpeg, read_file

        return int(decode_jpeg(read_file(self.paths[i]), mode=ImageReadMode.RGB).shape[-1])


def decode_only(paths: list[str], args: argparse.Namespace, how: str) -> Callable[[int], Iterator[int]]:
    dataset = DecodeFiles(paths, how)

    def run(seed: int) -> Iterator[int]:
        loader = DataLoader(
            dataset,
            batch_size=args.batch_size,
            shuffle=True,
            generator=torch.Generator().manual_seed(seed),
            num_workers=args.workers,
            collate_fn=len,
            drop_last=True,
            persistent_workers=False,
        )
        batches = iter(loader)
        try:
            yield from batches
        finally:
            batches._shutdown_workers()  # type: ignore[attr-defined]
            del batches

    return run


# --- timing ---------------------------------------------------------------------------------------------


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds() -> tuple[float, float]:
    """(this process, its live child processes: the loader's workers) user + system CPU seconds."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    workers = 0.0
    for pid in process_tree(os.getpid())[1:]:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            workers += (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return me.ru_utime + me.ru_stime, workers


def measure(run: Callable[[int], Iterator[int]], seed: int, warmup: int, batches: int | None, seconds: float) -> dict:
    """Start ``run(seed)``, skip ``warmup`` batches, then time ``batches`` batches (None: as many as fit in
    ``seconds``; fewer when the epoch ends first). Images/s of the timed part, and the CPU seconds this process
    and the loader's workers spent during it per image delivered."""
    started = time.perf_counter()
    stream = run(seed)
    for _ in range(warmup):
        next(stream)
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    images = count = 0
    while (count < batches) if batches is not None else (time.perf_counter() - t0 < seconds):
        got = next(stream, None)
        if got is None:  # the epoch ended first (a fast loader, a small folder): time what it delivered
            break
        images += got
        count += 1
    elapsed = time.perf_counter() - t0
    cpu1 = cpu_seconds()
    stream.close()  # type: ignore[attr-defined]
    return {
        "images_per_s": images / elapsed,
        "batches": count,
        "images": images,
        "seconds": elapsed,
        "startup_s": t0 - started,
        "cpu_ms_per_image": {
            "main": 1000 * (cpu1[0] - cpu0[0]) / images,
            "workers": 1000 * (cpu1[1] - cpu0[1]) / images,
        },
    }


def spread(values: list[float], digits: int = 1) -> dict:
    return {
        "min": round(min(values), digits),
        "median": round(statistics.median(values), digits),
        "max": round(max(values), digits),
    }


def bench_loader(args: argparse.Namespace) -> dict:
    root = photo_folder(args.cache, args.images)
    paths = jpeg_paths(root)
    size = warm_page_cache(paths)
    log(f"loader: {len(paths)} photos, {size / 2**20:.0f} MiB, read into the page cache")
    peers: dict[str, Callable[[int], Iterator[int]]] = {}
    skipped: dict[str, str] = {}
    makers: dict[str, Callable[[], Callable[[int], Iterator[int]]]] = {
        "vitlab": lambda: vitlab_stream(root, args),
        "vitlab-decode-gpu": lambda: vitlab_stream(root, args, decode="gpu"),
        "timm": lambda: timm_loader(root, args, prefetch=False),
        "timm-prefetch": lambda: timm_loader(root, args, prefetch=True),
        "decode-pil": lambda: decode_only(paths, args, "pil"),
        "decode-tv": lambda: decode_only(paths, args, "tv"),
    }
    for name in args.peers:
        try:
            peers[name] = makers[name]()
        except (ImportError, AttributeError, TypeError) as err:  # vitlab's stream not there yet
            skipped[name] = f"{type(err).__name__}: {err}"
            log(f"loader: {name} skipped: {skipped[name]}")
    names = list(peers)
    if not names:
        raise SystemExit("no loader to measure")
    epoch_batches = len(paths) * 9 // 10 // args.batch_size  # vitlab's train split may hold back 10%
    batches = args.batches
    if batches is None:
        warm_page_cache(paths)
        calibration = measure(peers[names[0]], 10_000, args.warmup, None, args.seconds)
        batches = max(5, min(epoch_batches - args.warmup, calibration["batches"]))
        log(f"loader: {names[0]} calibration {calibration['images_per_s']:.0f} images/s -> {batches} batches")
    rounds: dict[str, list[dict]] = {name: [] for name in names}
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            warm_page_cache(paths)  # again: this machine pages out files unread for a minute
            m = measure(peers[name], r, args.warmup, batches, args.seconds)
            rounds[name].append(m)
            log(f"loader: round {r + 1}/{args.rounds} {name}: {m['images_per_s']:.1f} images/s")
    rates = {name: [m["images_per_s"] for m in ms] for name, ms in rounds.items()}
    result: dict = {
        "folder": str(root),
        "photos": len(paths),
        "mean_kib": round(size / len(paths) / 1024, 1),
        "batch_size": args.batch_size,
        "workers": args.workers,
        "warmup_batches": args.warmup,
        "timed_batches": batches,
        "rounds": args.rounds,
        "images_per_s": {name: spread(v) for name, v in rates.items()},
        "per_round": {name: [round(v, 1) for v in vs] for name, vs in rates.items()},
        "startup_s": {name: round(statistics.median(m["startup_s"] for m in ms), 2) for name, ms in rounds.items()},
        "cpu_ms_per_image": {
            name: {
                part: round(statistics.median(m["cpu_ms_per_image"][part] for m in ms), 2)
                for part in ("main", "workers")
            }
            for name, ms in rounds.items()
        },
        "skipped": skipped,
    }
    if "vitlab" in rates:
        ratios: dict = {}
        for peer in names:
            if peer != "vitlab":
                paired = [a / b for a, b in zip(rates["vitlab"], rates[peer])]
                ratios[peer] = {"median": round(statistics.median(paired), 3), "rounds": [round(x, 3) for x in paired]}
        result["vitlab_over"] = ratios
        cost = {name: sum(part.values()) for name, part in result["cpu_ms_per_image"].items()}
        result["cpu_cost_ratio"] = {  # peer's CPU ms per image / vitlab's: > 1 where vitlab needs less CPU
            peer: round(cost[peer] / cost["vitlab"], 3) for peer in names if peer != "vitlab"
        }
        if "timm" in ratios:
            result["vs_timm"] = ratios["timm"]["median"]
        if "timm-prefetch" in ratios:
            result["vs_timm_prefetch"] = ratios["timm-prefetch"]["median"]
    decoders = [p for p in ("decode-pil", "decode-tv") if p in rates]
    if decoders:
        limit = max(decoders, key=lambda p: statistics.median(rates[p]))
        result["decode_limit"] = {"peer": limit, "images_per_s": round(statistics.median(rates[limit]), 1)}
        if "vitlab" in rates:
            result["vs_decode_limit"] = result["vitlab_over"][limit]["median"]
        if "vitlab-decode-gpu" in rates:
            paired = [a / b for a, b in zip(rates["vitlab-decode-gpu"], rates[limit])]
            result["decode_gpu_vs_decode_limit"] = round(statistics.median(paired), 3)
    if "vitlab" in rates and "vitlab-decode-gpu" in rates:
        paired = [a / b for a, b in zip(rates["vitlab-decode-gpu"], rates["vitlab"])]
        result["decode_gpu_over_cpu"] = round(statistics.median(paired), 3)
        result["decode_gpu_device"] = args.device
    result["what_each_did"] = WHAT_EACH_DID
    return result


WHAT_EACH_DID = {
    "vitlab": "StreamDataset(records, Preprocess(image_size=224, interpolation), train=True, scale=(0.08, 1), "
    "ratio=(3/4, 4/3), hflip=True).batches(random order, B, seed, workers=W): workers decode (PIL), "
    "random-resized-crop + resize (torchvision functional on PIL) + flip, uint8 batch; main process: "
    "engine.classify.as_pixels (float / 255) + data.augment.normalize_ in place (ImageNet mean/std)",
    "vitlab-decode-gpu": "the same StreamDataset with decode='gpu' on --device: workers send JPEG bytes + the crop box "
    "(Preprocess.train_box); main process: torchvision.io.decode_jpeg(batch, device), crop + antialiased resize + "
    "flip on the device (Preprocess.resized_crop), then as_pixels + normalize_ there",
    "timm": "create_dataset('', root) + create_loader(input_size=(3, 224, 224), is_training=True, no_aug=False, "
    "scale=(0.08, 1), ratio=(3/4, 4/3), hflip=0.5, vflip=0, color_jitter=None, auto_augment=None, re_prob=0, "
    "interpolation, ImageNet mean/std, num_workers=W, use_prefetcher=False, persistent_workers=False): "
    "workers: PIL open + convert RGB, RandomResizedCropAndInterpolation, RandomHorizontalFlip, ToTensor, "
    "Normalize; float batch",
    "timm-prefetch": "the same with use_prefetcher=True, device=cpu: workers end with PIL-to-uint8 tensor "
    "(fast_collate); PrefetchLoader normalises in the main process",
    "decode-pil": "DataLoader(W workers) over the files: Image.open + convert('RGB'), width returned",
    "decode-tv": "DataLoader(W workers) over the files: torchvision.io.decode_jpeg(read_file, RGB), width returned",
}


# --- where a loader's time goes: each stage in this process, one thread ----------------------------------


def per_image_ms(fn: Callable[[int], object], n: int, repeats: int = 3) -> float:
    """Best of ``repeats`` of the mean CPU milliseconds of ``fn(i)`` over ``i < n`` (this process's CPU time,
    so other processes' load does not count)."""
    fn(0)
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for i in range(n):
            fn(i)
        best = min(best, (time.process_time() - start) / n)
    return round(1000 * best, 3)


def bench_stages(args: argparse.Namespace) -> dict:
    """Milliseconds per image of each stage of the peers' pipelines, measured one after another in this
    process with one torch thread (no workers): what a worker and the main process spend per image."""
    from PIL import Image
    from timm.data import create_transform
    from torchvision.io import ImageReadMode, decode_jpeg, read_file

    from vitlab.data import read_records
    from vitlab.data.device_decode import decode_batch
    from vitlab.data.preprocess import BatchBuffer, Preprocess, normalize_
    from vitlab.data.stream import StreamDataset, sample_seeds
    from vitlab.tasks.classify.task import as_pixels

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = photo_folder(args.cache, args.images)
    records = read_records("folder", root)["train"]
    n = min(args.stage_images, len(records))
    paths = [records.name(i) for i in range(n)]
    warm_page_cache(paths)
    preprocess = Preprocess(image_size=(224, 224), interpolation=args.interpolation)
    dataset = StreamDataset(records, preprocess, train=True, hflip=True, scale=SCALE, ratio=RATIO)
    encoded = dataset.augmented(decode="gpu")
    images = [records.open(i) for i in range(n)]
    common = dict(is_training=True, scale=SCALE, ratio=RATIO, hflip=0.5, color_jitter=None)
    common |= dict(interpolation=args.interpolation, mean=IMAGENET_MEAN, std=IMAGENET_STD)
    timm_float = create_transform((3, 224, 224), use_prefetcher=False, **common)  # type: ignore[arg-type]
    timm_uint8 = create_transform((3, 224, 224), use_prefetcher=True, **common)  # type: ignore[arg-type]
    batch = torch.randint(0, 256, (args.batch_size, 3, 224, 224), dtype=torch.uint8)
    mean, std = torch.tensor(IMAGENET_MEAN), torch.tensor(IMAGENET_STD)
    mean255, std255 = (255 * mean).view(1, 3, 1, 1), (255 * std).view(1, 3, 1, 1)
    cpu = torch.device("cpu")
    pixels = BatchBuffer()
    b = args.batch_size
    worker = {
        "decode PIL (Image.open + convert RGB)": per_image_ms(lambda i: Image.open(paths[i]).convert("RGB"), n),
        "decode torchvision.io.decode_jpeg": per_image_ms(
            lambda i: decode_jpeg(read_file(paths[i]), mode=ImageReadMode.RGB), n
        ),
        "vitlab Records.open": per_image_ms(records.open, n),
        "vitlab Preprocess.train_image (decoded image in)": per_image_ms(
            lambda i: preprocess.train_image(images[i], torch.Generator().manual_seed(i), SCALE, RATIO, True), n
        ),
        "vitlab StreamDataset[i] (open + train_image)": per_image_ms(lambda i: dataset[(i, i)], n),
        "vitlab StreamDataset[i], decode=gpu (bytes + header + train_box)": per_image_ms(lambda i: encoded[(i, i)], n),
        "timm transform, uint8 (prefetcher; decoded image in)": per_image_ms(lambda i: timm_uint8(images[i]), n),
        "timm transform, float normalised (decoded image in)": per_image_ms(lambda i: timm_float(images[i]), n),
    }
    jpegs = [encoded[(i, i)][0] for i in range(b)]
    main = {
        "vitlab decode_batch on the CPU kernels (decode + crop + resize + flip)": per_image_ms(
            lambda i: decode_batch(jpegs, preprocess, cpu), 3
        )
        / b,
        "vitlab sample_seeds (batch sampler)": per_image_ms(lambda i: sample_seeds(0, range(i * b, i * b + b)), 20) / b,
        "vitlab as_pixels + normalize_, a new batch": per_image_ms(
            lambda i: normalize_(as_pixels(batch, cpu), mean, std), 10
        )
        / b,
        "vitlab as_pixels into a BatchBuffer + normalize_": per_image_ms(
            lambda i: normalize_(as_pixels(batch, cpu, pixels), mean, std), 10
        )
        / b,
        "timm PrefetchLoader float().sub_().div_()": per_image_ms(
            lambda i: batch.to(torch.float32).sub_(mean255).div_(std255), 10
        )
        / b,
    }
    torch.set_num_threads(threads)
    return {
        "images": n,
        "threads": 1,
        "worker_ms_per_image": worker,
        "main_ms_per_image": {k: round(v, 3) for k, v in main.items()},
    }


# --- a train run's process tree -------------------------------------------------------------------------


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants alive now."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def status_kib(pid: int) -> dict[str, int]:
    """``VmRSS``, ``VmHWM`` (the kernel's peak RSS) of ``pid`` in KiB from ``/proc/PID/status`` (cheap)."""
    out = {"VmRSS": 0, "VmHWM": 0}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in out:
                    out[key] = int(line.split()[1])
    except OSError:
        pass
    return out


def pss_kib(pid: int) -> int:
    """PSS of ``pid`` in KiB from ``/proc/PID/smaps_rollup`` (walks its page tables: ~0.1-0.3 s for a 2 GB
    process, so read only at new highs of the summed RSS)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeMemory:
    """Peak memory of a process tree, sampled: the summed RSS of the tree every ``interval`` s (the tree
    re-listed every second), its summed PSS whenever the summed RSS reaches a new high (at most once a
    second), and each process's own peak RSS (``VmHWM``) as last seen."""

    def __init__(self, root: int, interval: float = 0.2) -> None:
        self.root, self.interval = root, interval
        self.tree: list[int] = [root]
        self.peak_rss = self.peak_pss = self.pss_rss = self.samples = self.most = 0
        self.hwm: dict[int, int] = {}
        self.listed = self.pss_at = 0.0

    def sample(self) -> None:
        now = time.perf_counter()
        if now - self.listed >= 1.0:
            self.tree, self.listed = process_tree(self.root), now
            self.most = max(self.most, len(self.tree))
        status = {pid: status_kib(pid) for pid in self.tree}
        for pid, s in status.items():
            self.hwm[pid] = max(self.hwm.get(pid, 0), s["VmHWM"])
        rss = sum(s["VmRSS"] for s in status.values())
        self.samples += 1
        if rss > self.peak_rss:
            self.peak_rss = rss
            if now - self.pss_at >= 1.0:
                pss = sum(pss_kib(pid) for pid in self.tree)
                self.pss_at = now
                if pss > self.peak_pss:
                    self.peak_pss, self.pss_rss = pss, rss

    def record(self) -> dict:
        workers = [kib for pid, kib in self.hwm.items() if pid != self.root]
        return {
            "peak_pss_mib": round(self.peak_pss / 1024, 1),
            "peak_rss_sum_mib": round(self.peak_rss / 1024, 1),
            "peak_rss_main_mib": round(self.hwm.get(self.root, 0) / 1024, 1),
            "peak_rss_worker_mib": round(max(workers, default=0) / 1024, 1),
            "processes_seen": len(self.hwm),
            "most_processes": self.most,
            "samples": self.samples,
        }


def watched(command: list[str], tail: int = 2000) -> dict:
    """Run ``command`` (its output discarded) while sampling its process tree's memory; its return code, wall and
    CPU seconds (its own and its waited-for children's), the load average before it, :class:`TreeMemory`'s record,
    and the tail of its stderr when it failed."""
    load = [round(v, 2) for v in os.getloadavg()]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
        memory = TreeMemory(child.pid)
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            memory.sample()
            time.sleep(memory.interval)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        errors = stderr.read().decode(errors="replace")
    record = {
        "returncode": child.returncode,
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "load_before": load,
        **memory.record(),
    }
    if child.returncode:
        record["stderr_tail"] = errors[-tail:]
    return record


def train_run(root: Path, args: argparse.Namespace) -> dict:
    out = Path(tempfile.mkdtemp(prefix="bench-data-run-"))
    command = [
        *(["vitlab"] if not args.python_m else [sys.executable, "-m", "vitlab"]),
        "train",
        "--dataset",
        "folder",
        "--data-dir",
        str(root),
        "--image-size",
        "224",
        "--loader",
        "stream",
        "--model",
        "vit-tiny-patch16-224",
        "--set",
        f"time_limit_s={args.train_seconds:g}",
        "--epochs",
        "1",
        "--batch-size",
        "32",
        "--quiet",
        "--device",
        "cpu",
        "--out",
        str(out / "run"),
    ]
    log("train:", " ".join(command))
    record = {"photos": len(jpeg_paths(root)), **watched(command), "command": " ".join(command)}
    metrics = out / "run" / "metrics.jsonl"
    if metrics.exists():
        rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        wait = [r["data_wait"] for r in rows if "data_wait" in r]
        record["epochs"] = [
            {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items() if not k.startswith("_")}
            for r in rows
        ]
        if wait:
            record["data_wait"] = round(max(wait), 4)
    if args.keep_runs:
        record["run_dir"] = str(out / "run")
    else:
        subprocess.run(["rm", "-rf", str(out)], check=False)
    log(f"train: {record['photos']} photos: peak PSS {record['peak_pss_mib']} MiB, data_wait {record.get('data_wait')}")
    return record


def bench_train(args: argparse.Namespace) -> dict:
    folders = [photo_folder(args.cache, n) for n in args.train_images]
    runs = []
    for root in folders:
        warm_page_cache(jpeg_paths(root))
        runs.append(train_run(root, args))
    result: dict = {"train_seconds": args.train_seconds, "runs": runs}
    if len(runs) > 1 and all(r["returncode"] == 0 for r in runs):
        small, large = runs[0], runs[-1]
        result["peak_memory_ratio"] = round(large["peak_pss_mib"] / small["peak_pss_mib"], 3)
        result["peak_rss_sum_ratio"] = round(large["peak_rss_sum_mib"] / small["peak_rss_sum_mib"], 3)
    waits = [r["data_wait"] for r in runs if "data_wait" in r]
    if waits:
        result["data_wait"] = max(waits)
    return result


def machine() -> dict:
    import PIL
    import timm
    import torchvision
    from PIL import features

    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "timm": timm.__version__,
        "pillow": PIL.__version__,
        "libjpeg_turbo": features.check_feature("libjpeg_turbo"),
        "torch_threads": torch.get_num_threads(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=10_000, help="photos in the loader benchmark's folder")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seconds", type=float, default=15.0, help="timed seconds per measurement (sets --batches)")
    p.add_argument("--batches", type=int, help="timed batches per measurement (default: from --seconds)")
    p.add_argument("--warmup", type=int, default=5, help="batches discarded before timing")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS))
    p.add_argument("--interpolation", default="bilinear", choices=("bilinear", "bicubic"))
    p.add_argument(
        "--device",
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="where vitlab-decode-gpu decodes (default: cuda when there is one, else the CPU kernels)",
    )
    p.add_argument("--train-images", type=int, nargs="+", default=[2000, 16000])
    p.add_argument("--train-seconds", type=float, default=60.0, help="the train run's time_limit_s")
    p.add_argument("--stage-images", type=int, default=300, help="photos timed per stage in `stages`")
    p.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--cache", type=Path, default=Path("~/.cache/vitlab-bench").expanduser())
    p.add_argument("--keep-runs", action="store_true", help="keep the train runs' folders")
    p.add_argument("--python-m", action="store_true", help="run `python -m vitlab` instead of the vitlab script")
    args = p.parse_args()
    args.cache = args.cache.expanduser()
    report: dict = {"benchmark": "data", "machine": machine(), "load_before": os.getloadavg()}
    started = time.perf_counter()
    if "loader" in args.only:
        report["loader"] = bench_loader(args)
    if "stages" in args.only:
        report["stages"] = bench_stages(args)
    if "train" in args.only:
        report["train"] = bench_train(args)
    report["load_after"] = os.getloadavg()
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["goals"] = GOALS
    if "loader" in args.only or "stages" in args.only:
        report["photos"] = folder_info(photo_folder(args.cache, args.images))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
