"""End to end on one photo folder: ``vitlab train`` / ``vitlab evaluate`` against timm's ``train.py`` /
``validate.py`` logic, interleaved rounds, wall and CPU ratios with their spread, peak memory, the machine's load.

    python benchmarks/bench_e2e.py                                   # 1,000 + 200 photos at 224, 3 rounds
    python benchmarks/bench_e2e.py --epochs 10 --images 1000        # several epochs of small data
    python benchmarks/bench_e2e.py --images 60 --val 30 --image-size 64 --rounds 1   # a quick look
    python benchmarks/bench_e2e.py --only evaluate --weights runs/photos             # evaluate alone, given weights
    python benchmarks/bench_e2e.py --loader memory                  # the memory loader's peak vs timm's, 1 epoch

The folder is ``benchmarks/photos.py``'s ``--layout splits`` (``train/`` and ``val/``, every class in both; JPEG
photos of 224-320 px, 10 classes). Each peer runs as its own process (its DataLoader workers included):

- ``vitlab-train``: ``vitlab train --dataset folder --data-dir DIR --model vit-tiny-patch16-224 --image-size S
  --epochs E --batch-size B --device cpu --set data.workers=W --loader L`` (``--loader``, default ``auto``: its own
  choice, printed in the run's data line: stream for one epoch, memory for several epochs of small data).
- ``timm-train``: timm's ``train.py`` loop over its documented APIs (``train.py`` itself is not installed with
  the package): ``create_model(vit_tiny_patch16_224, num_classes=K, img_size=S)``, ``resolve_data_config`` (at ``S``),
  ``create_dataset("", root=DIR/train)``, ``create_loader(is_training=True, use_prefetcher=False,
  num_workers=W)`` (RandomResizedCrop + flip, no auto-augment or erasing), ``create_optimizer_v2("adamw")``,
  cross-entropy, ``E`` epochs, each followed by a validation pass over ``DIR/val`` as ``train.py`` does.
- ``vitlab-evaluate``: ``vitlab evaluate RUN --split val --device cpu`` on the weights of an untimed vitlab run.
- ``timm-validate``: ``validate.py``'s loop: the same weights (``vitlab convert RUN --to timm``) read by
  ``timm.models.load_checkpoint`` as ``validate.py --checkpoint`` reads them, ``create_loader(is_training=False)``
  over ``DIR/val``, eval mode, ``no_grad``, top-1.

Per process: wall seconds, CPU seconds (user + system of it and its reaped workers, from ``os.wait4``), and the
peak of its process tree's summed RSS and PSS (``bench_data.TreeMemory``). ``--rounds`` rounds, the peers'
order alternating each round; the 1-, 5- and 15-minute load averages are recorded before every run. Reported:
each round's ratios (speed: timm wall / vitlab wall; CPU: timm CPU / vitlab CPU; memory: vitlab peak / timm
peak) and their median with min and max. A claim is the median, never the best round; on a shared machine
read the load beside it.

Prints one JSON object (progress on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_data import machine, watched  # noqa: E402
from photos import make_photo_folder  # noqa: E402

TIMM_MODEL = "vit_tiny_patch16_224"
VITLAB_MODEL = "vit-tiny-patch16-224"


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def timm_folder_loader(folder: Path, training: bool, config: dict, batch_size: int, workers: int):
    """timm's ``create_loader`` over the ImageFolder ``folder`` as its train.py / validate.py build it (no
    prefetcher: CPU), with the data config ``config`` (``resolve_data_config``'s)."""
    from timm.data import create_dataset, create_loader

    return create_loader(
        create_dataset("", root=str(folder), is_training=training),
        input_size=config["input_size"],
        batch_size=batch_size,
        is_training=training,
        use_prefetcher=False,
        interpolation=config["interpolation"],
        mean=config["mean"],
        std=config["std"],
        crop_pct=config["crop_pct"],
        num_workers=workers,
        persistent_workers=False,
    )


def timm_peer(args: argparse.Namespace) -> None:
    """The timm side, run in its own process: ``train`` (train.py's loop) or ``validate`` (validate.py's)."""
    import timm
    import torch
    from timm.data import resolve_data_config
    from timm.optim import create_optimizer_v2

    torch.manual_seed(0)
    root = Path(args.root)
    classes = len([p for p in (root / "train").iterdir() if p.is_dir()])
    model = timm.create_model(TIMM_MODEL, num_classes=classes, img_size=args.image_size)
    config = resolve_data_config({"input_size": (3, args.image_size, args.image_size)}, model=model)

    def loader(split: str, training: bool):
        return timm_folder_loader(root / split, training, config, args.batch_size, args.workers)

    def validate() -> float:
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for x, y in loader("val", False):
                correct += int((model(x).argmax(1) == y).sum())
                total += len(y)
        return correct / total

    if args.peer == "timm-validate":
        if args.checkpoint:
            from timm.models import load_checkpoint

            load_checkpoint(model, args.checkpoint)
        validate()
        return
    optimizer = create_optimizer_v2(model, opt="adamw", lr=args.lr, weight_decay=0.05)
    loss_fn = torch.nn.CrossEntropyLoss()
    train = loader("train", True)
    for _ in range(args.epochs):
        model.train()
        for x, y in train:
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        validate()


def vitlab_train(root: Path, out: Path, args: argparse.Namespace) -> list[str]:
    return [
        *(sys.executable, "-m", "vitlab", "train", "--dataset", "folder", "--data-dir", str(root)),
        *("--model", VITLAB_MODEL, "--image-size", str(args.image_size), "--epochs", str(args.epochs)),
        *("--batch-size", str(args.batch_size), "--lr", str(args.lr), "--device", "cpu", "--quiet"),
        *("--set", f"data.workers={args.workers}", "--loader", args.loader, "--out", str(out), "--overwrite"),
    ]


def peer_command(peer: str, root: Path, args: argparse.Namespace) -> list[str]:
    return [
        *(sys.executable, __file__, "--peer", peer, "--root", str(root), "--image-size", str(args.image_size)),
        *("--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--lr", str(args.lr)),
        *("--workers", str(args.workers)),
    ]


def spread(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=1000, help="training photos")
    p.add_argument("--val", type=int, default=200, help="validation photos")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--loader", choices=("auto", "memory", "stream"), default="auto", help="vitlab train's --loader")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cache", type=Path, default=Path("~/.cache/vitlab-bench").expanduser())
    p.add_argument("--only", nargs="+", choices=("train", "evaluate"), default=["train", "evaluate"])
    p.add_argument("--weights", type=Path, help="a vitlab run on this folder for evaluate (default: an untimed one)")
    p.add_argument("--peer", choices=("timm-train", "timm-validate"), help=argparse.SUPPRESS)
    p.add_argument("--root", help=argparse.SUPPRESS)
    p.add_argument("--checkpoint", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.peer:
        timm_peer(args)
        return
    n = args.images + args.val
    val_every = max(2, round(n / args.val))
    root = make_photo_folder(args.cache / f"photos-e2e-{n}-{val_every}", n, layout="splits", val_every=val_every)
    work = Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    try:
        weights = args.weights or work / "weights"
        if "evaluate" in args.only and args.weights is None:
            log("setup: an untimed vitlab run for evaluate's weights")
            setup = watched(vitlab_train(root, weights, argparse.Namespace(**{**vars(args), "epochs": 1})))
            if setup["returncode"]:
                raise SystemExit(f"the setup run failed: {setup.get('stderr_tail')}")
        timm_weights = work / "timm-weights.safetensors"
        if "evaluate" in args.only:
            convert = [sys.executable, "-m", "vitlab", "convert", str(weights), "--to", "timm", str(timm_weights)]
            if subprocess.run(convert, capture_output=True, text=True).returncode:
                raise SystemExit(f"{' '.join(convert)} failed")
        peers = {
            "train": {
                "vitlab": vitlab_train(root, work / "run", args),
                "timm": peer_command("timm-train", root, args),
            },
            "evaluate": {
                "vitlab": [
                    *(sys.executable, "-m", "vitlab", "evaluate", str(weights), "--split", "val"),
                    *("--device", "cpu", "--set", f"data.workers={args.workers}"),
                ],
                "timm": [*peer_command("timm-validate", root, args), "--checkpoint", str(timm_weights)],
            },
        }
        peers = {what: commands for what, commands in peers.items() if what in args.only}
        rounds: dict[str, list[dict]] = {what: [] for what in peers}
        for r in range(args.rounds):
            for what, commands in peers.items():
                order = ["vitlab", "timm"] if r % 2 == 0 else ["timm", "vitlab"]
                runs = {}
                for peer in order:
                    runs[peer] = watched(commands[peer])
                    log(f"round {r} {what} {peer}: {runs[peer]}")
                rounds[what].append(runs)
        result: dict = {
            "photos": {"train": args.images, "val": args.val, "root": str(root)},
            "settings": {k: v for k, v in vars(args).items() if k not in ("peer", "root", "cache")},
            "machine": machine(),
            "commands": {what: {peer: " ".join(c) for peer, c in cmds.items()} for what, cmds in peers.items()},
        }
        for what, runs in rounds.items():
            ok = [run for run in runs if all(run[peer]["returncode"] == 0 for peer in run)]
            entry: dict = {"rounds": runs}
            if ok:
                entry["speed_ratio"] = spread([run["timm"]["wall_s"] / run["vitlab"]["wall_s"] for run in ok])
                entry["cpu_ratio"] = spread([run["timm"]["cpu_s"] / run["vitlab"]["cpu_s"] for run in ok])
                entry["peak_pss_ratio"] = spread(
                    [run["vitlab"]["peak_pss_mib"] / max(run["timm"]["peak_pss_mib"], 1e-9) for run in ok]
                )
                for peer in ("vitlab", "timm"):
                    entry[f"{peer}_wall_s"] = spread([run[peer]["wall_s"] for run in ok])
                    entry[f"{peer}_peak_pss_mib"] = spread([run[peer]["peak_pss_mib"] for run in ok])
            result[what] = entry
        result["load_after"] = [round(v, 2) for v in os.getloadavg()]
        print(json.dumps(result, indent=1, default=str))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
