"""Peak memory (not time) of one epoch through each loader on one photo folder: vitlab's memory loader and its
stream against timm's ``create_loader`` over an ImageFolder.

    python benchmarks/bench_memory.py                                # 1,000 + 200 photos at 224, 2 workers
    python benchmarks/bench_memory.py --images 300 --val 60 --rounds 1   # a quick look

The folder is ``benchmarks/photos.py``'s ``--layout splits``, as ``bench_e2e.py`` makes it (``train/``, ``val/``).
Each peer runs as its own process and reads ``train/`` once (``--batch-size`` batches, a seeded random order)
and ``val/`` once, as a one-epoch run does, with ``--workers`` DataLoader processes and no model (a model adds the
same to every peer):

- ``vitlab-memory``: ``load_dataset("folder", DIR, preprocess=Preprocess((S, S)), loader="memory", workers=W)``:
  the training split decoded into memory (its statistics need it), indexed batch by batch, scaled and normalised
  (the classify task's memory path); then the validation split, decoded when first read.
- ``vitlab-stream``: the same with ``loader="stream"``: training batches RandomResizedCrop + flip in the workers.
- ``timm``: ``create_loader(create_dataset("", root=DIR/train), is_training=True, use_prefetcher=False,
  num_workers=W)``, then ``DIR/val`` with ``is_training=False`` (``bench_e2e.py``'s timm peer without the model).

Per process: the peak of its process tree's summed PSS (shared pages counted once) and RSS, and the main
process's own peak RSS (``VmHWM``, exact: the memory loader's cache lives there), by ``bench_data.TreeMemory``.
Reported: each peer's figures per round, their median, and each vitlab peer's median ratio to timm's peak PSS.
Memory is not disturbed by the machine's load, so this may run beside other work (at ``nice -n 19``).

Prints one JSON object (progress on stderr).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_data import machine, watched  # noqa: E402
from bench_e2e import timm_folder_loader  # noqa: E402
from photos import make_photo_folder  # noqa: E402

PEERS = ("vitlab-memory", "vitlab-stream", "timm")


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def vitlab_epoch(root: Path, args: argparse.Namespace, loader: str) -> None:
    """One epoch of ``root`` through vitlab's ``loader``: the training split, then the validation split."""
    import torch

    from vitlab.data import load_dataset
    from vitlab.data.preprocess import Preprocess
    from vitlab.data.stream import StreamDataset

    read = Preprocess(image_size=(args.image_size, args.image_size))
    splits = load_dataset("folder", root, preprocess=read, loader=loader, workers=args.workers)
    order = torch.randperm(len(splits.train), generator=torch.Generator().manual_seed(0))
    for name, data in (("train", splits.train), ("val", splits.val)):
        index = order if name == "train" else torch.arange(len(data))
        if isinstance(data, StreamDataset):
            stream = data.augmented(True) if name == "train" else data
            batches = (images for images, _ in stream.batches(index, args.batch_size, seed=0))
        else:
            batches = (data.images[part] for part in index.split(args.batch_size))
        for images in batches:
            splits.normalize(images)


def timm_epoch(root: Path, args: argparse.Namespace) -> None:
    """One epoch of ``root`` through timm's ``create_loader``: ``train/`` augmented, then ``val/``."""
    from timm.data import resolve_data_config

    config = resolve_data_config({"input_size": (3, args.image_size, args.image_size)})
    for split, training in (("train", True), ("val", False)):
        loader = timm_folder_loader(root / split, training, config, args.batch_size, args.workers)
        for _ in loader:
            pass


def measured(peer: str, root: Path, args: argparse.Namespace) -> dict:
    """Run ``peer`` in its own process; its process tree's peak memory, wall seconds and return code."""
    command = [
        *(sys.executable, __file__, "--peer", peer, "--root", str(root), "--image-size", str(args.image_size)),
        *("--batch-size", str(args.batch_size), "--workers", str(args.workers)),
    ]
    return watched(command, tail=1500)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=1000, help="training photos")
    p.add_argument("--val", type=int, default=200, help="validation photos")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS))
    p.add_argument("--cache", type=Path, default=Path("~/.cache/vitlab-bench").expanduser())
    p.add_argument("--peer", choices=PEERS, help=argparse.SUPPRESS)
    p.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.peer:
        if args.peer == "timm":
            timm_epoch(args.root, args)
        else:
            vitlab_epoch(args.root, args, args.peer.removeprefix("vitlab-"))
        return
    n = args.images + args.val
    val_every = max(2, round(n / args.val))
    root = make_photo_folder(args.cache / f"photos-e2e-{n}-{val_every}", n, layout="splits", val_every=val_every)
    runs: dict[str, list[dict]] = {peer: [] for peer in args.peers}
    for r in range(args.rounds):
        for peer in args.peers if r % 2 == 0 else args.peers[::-1]:
            runs[peer].append(measured(peer, root, args))
            log(f"round {r} {peer}: {runs[peer][-1]}")
    result: dict = {
        "photos": {"train": args.images, "val": args.val, "root": str(root)},
        "settings": {k: v for k, v in vars(args).items() if k not in ("peer", "root", "cache")},
        "machine": machine(),
    }
    for peer, records in runs.items():
        ok = [rec for rec in records if rec["returncode"] == 0]
        result[peer] = {"rounds": records}
        for key in ("peak_pss_mib", "peak_rss_sum_mib", "peak_rss_main_mib"):
            if ok:
                result[peer][key] = statistics.median(rec[key] for rec in ok)
    timm = result.get("timm", {}).get("peak_pss_mib")
    for peer in ("vitlab-memory", "vitlab-stream"):
        if timm and "peak_pss_mib" in result.get(peer, {}):
            result[peer]["peak_pss_ratio_to_timm"] = round(result[peer]["peak_pss_mib"] / timm, 3)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
