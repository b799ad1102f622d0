"""Attention variants measured on this machine: time, peak memory, growth in N, and the cost model.

    python benchmarks/bench_attention.py --data-dir ../shared/data/mnist-t10k       # all sections
    python benchmarks/bench_attention.py --only blocks --plot attention.png           # one section

Prints one JSON line per measurement and a ``summary`` line with the issue's goals. Sections:

- ``blocks``: one pre-norm block (ViT-Ti's width, D=192, 3 heads; batch 1) at 224 ... 1024 pixels
  in 16x16 patches (196 ... 4,096 tokens) with full attention (explicit scores, and PyTorch's fused
  kernel), shifted windows of 8x8, linear and low-rank (k=64) attention, and sparse attention (band and
  stride the grid's width; the blocked kernel that forms the pattern's blocks only, from
  ``BLOCKED_FROM`` = 512 tokens, the masked fused kernel below): forward seconds (wall, best round;
  beside them the mean CPU seconds of a call, ``time.process_time``), peak memory, the exponent ``a``
  of ``time ~ N^a`` (least squares on log-log, over all sizes and over the largest three; beside it
  the exponent of the cost model's FLOPs) and, per size, the ratios to explicit full attention
  measured and predicted. Predicted time ratio: the cost model's FLOPs. Predicted peak: the cost
  model's attention memory ``S`` in a two-phase activation model of a pre-norm block,
  ``max(c S + 5 N D, (2 + 2 r) N D)`` floats -- the attention phase holds the normalised input,
  ``q, k, v`` and the output (5 N D) with the scores (``c = 2`` for explicit full attention's
  softmax, scores and weights both alive; ``c = 1`` otherwise, a bound, and for sparse attention,
  whose kernel exponentiates each set of scores in place, plus its band windows of K and V,
  ``2 (2r + 1) N D = 6 N D``), the MLP phase the residual, the normalised input and the hidden layer
  before and after GELU (``r`` = MLP ratio 4).
- ``tome``: forward throughput of ``vit-tiny-patch16-224`` (random weights: speed needs none) with
  ToMe at r = 8 (and more) against the unmerged model; each r constant per block and front-loaded
  (as many merges in all, decreasing linearly over the blocks).
- ``mnist``: a ViT (patch 2: 196 tokens; 8 blocks of width 32) trained on the first 8,000 images of
  MNIST's test split (12 epochs, about 12 minutes on one busy core; cached in
  ``--mnist-checkpoint``, so later runs take seconds), then for several r and both schedules the
  merged model's speed-up and its agreement with the unmerged model's predictions on the last
  2,000 (``--data-dir``; skipped without it).
- ``swin``: vitlab's Swin-T converted from timm's (random init) against timm's, alternately in one
  process: throughput and the largest logit difference.

Timing: best of ``--rounds`` rounds, the contenders of a comparison run alternately so load spikes
hit all of them; one thread by default (``--threads``), which is what a busy 2-core machine gives
steadily.

Peak memory on CPU: PyTorch keeps no ``max_memory_allocated`` for the CPU allocator, and neither
RSS (caching, page granularity) nor tracemalloc (Python objects only) sees tensor intermediates.
So one forward runs under ``torch.profiler`` with ``profile_memory=True``, which records every
allocation and free of PyTorch's CPU allocator as a memory event with a signed size; sorted by
time, their running sum is the bytes live at each moment, and its maximum is the peak the forward
needed on top of its inputs and weights (which existed before). It counts short-lived
intermediates -- the ``N x N`` scores that the softmax consumes -- exactly. (On CUDA,
``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats`` is the same quantity.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from vitlab.analysis.cost import Workload, attention_cost, flops
from vitlab.data.idx import read_idx_pair
from vitlab.engine.measure import best_seconds, peak_memory
from vitlab.interop import from_timm
from vitlab.layers import Block
from vitlab.models import VisionTransformer, ViTConfig, apply_tome, build_registered, front_loaded

BLOCK_KINDS = ("full-explicit", "full-fused", "window", "linear", "lowrank", "sparse")
SECTIONS = ("blocks", "tome", "mnist", "swin")


def emit(record: dict) -> dict:
    print(json.dumps(record), flush=True)
    return record


def growth_exponent(tokens: list[int], seconds: list[float]) -> float:
    """Slope of ``log seconds`` against ``log N`` (least squares)."""
    return float(np.polyfit(np.log(tokens), np.log(seconds), 1)[0])


def cpu_timed(fns: dict[str, Callable[[], object]]) -> tuple[dict[str, Callable[[], None]], dict[str, list[float]]]:
    """``fns`` wrapped to add each call's CPU seconds (``time.process_time``) to ``spent[name] = [seconds, calls]``:
    beside the best wall time, how much of a call the process itself ran on a shared machine."""
    spent = {name: [0.0, 0.0] for name in fns}

    def wrap(name: str, fn: Callable[[], object]) -> Callable[[], None]:
        def call() -> None:
            start = time.process_time()
            fn()
            spent[name][0] += time.process_time() - start
            spent[name][1] += 1

        return call

    return {name: wrap(name, fn) for name, fn in fns.items()}, spent


# -- blocks ------------------------------------------------------------------------------------------------


def attention_block(kind: str, dim: int, heads: int, grid: tuple[int, int], window: int, rank: int) -> Block:
    attention = "full" if kind.startswith("full") else kind
    block = Block(
        dim,
        heads,
        attention=attention,
        attention_options=dict(grid=grid, num_tokens=grid[0] * grid[1], window_size=window, shift=True, lowrank_k=rank),
    ).eval()
    block.attn.fused = kind != "full-explicit"
    return block


def bench_blocks(args: argparse.Namespace) -> dict:
    rows = []
    for image in args.images:
        grid = (image // args.patch, image // args.patch)
        n = grid[0] * grid[1]
        x = torch.randn(1, n, args.dim)
        blocks = {
            kind: attention_block(kind, args.dim, args.heads, grid, args.window, args.rank) for kind in BLOCK_KINDS
        }
        fns, cpu = cpu_timed({k: (lambda b=b, x=x: b(x)) for k, b in blocks.items()})
        with torch.no_grad():
            seconds = best_seconds(fns, args.rounds)
            peaks = {k: peak_memory(lambda b=b, x=x: b(x)) for k, b in blocks.items()}
        work = Workload(
            image, args.patch, dim=args.dim, depth=1, heads=args.heads, window_size=args.window, lowrank_k=args.rank
        )
        for kind in BLOCK_KINDS:
            model_kind = "full" if kind.startswith("full") else kind
            predicted = flops(work, model_kind)
            scores = attention_cost(work, model_kind).memory
            if kind == "full-fused":
                scores = 0  # the fused kernel never forms the scores
            activations = 4 * n * args.dim  # one (N, D) float tensor, bytes
            held = (2 * scores if kind == "full-explicit" else scores) + (11 if kind == "sparse" else 5) * activations
            peak = max(held, (2 + 2 * 4) * activations)
            rows.append(
                emit(
                    {
                        "bench": "block",
                        "image": image,
                        "tokens": n,
                        "kind": kind,
                        "seconds": seconds[kind],
                        "cpu_seconds": cpu[kind][0] / cpu[kind][1],
                        "peak_bytes": peaks[kind],
                        "predicted_flops": predicted["total"] - predicted["patch_embed"],
                        "predicted_attention_bytes": scores,
                        "predicted_peak_bytes": peak,
                    }
                )
            )
    by = {(r["image"], r["kind"]): r for r in rows}
    tokens = [by[(image, "full-explicit")]["tokens"] for image in args.images]
    exponents = {
        kind: {
            "all": round(growth_exponent(tokens, [by[(i, kind)]["seconds"] for i in args.images]), 3),
            "largest_3": round(growth_exponent(tokens[-3:], [by[(i, kind)]["seconds"] for i in args.images[-3:]]), 3),
            "predicted_by_flops": round(
                growth_exponent(tokens, [by[(i, kind)]["predicted_flops"] for i in args.images]), 3
            ),
        }
        for kind in BLOCK_KINDS
    }
    ratios = []
    for image in args.images:
        full = by[(image, "full-explicit")]
        for kind in BLOCK_KINDS[1:]:
            r = by[(image, kind)]
            ratios.append(
                emit(
                    {
                        "bench": "block_ratio_to_full_explicit",
                        "image": image,
                        "kind": kind,
                        "time_measured": round(full["seconds"] / r["seconds"], 2),
                        "time_predicted_by_flops": round(full["predicted_flops"] / r["predicted_flops"], 2),
                        "peak_measured": round(full["peak_bytes"] / r["peak_bytes"], 2),
                        "peak_predicted": round(full["predicted_peak_bytes"] / r["predicted_peak_bytes"], 2),
                    }
                )
            )
    largest = args.images[-1]
    summary = {
        "exponents": exponents,
        "window_memory_saving_at_largest": round(
            by[(largest, "full-explicit")]["peak_bytes"] / by[(largest, "window")]["peak_bytes"], 2
        ),
        "sparse_memory_saving_at_largest": round(
            by[(largest, "full-explicit")]["peak_bytes"] / by[(largest, "sparse")]["peak_bytes"], 2
        ),
        "sparse_peak_over_fused_full_at_largest": round(
            by[(largest, "sparse")]["peak_bytes"] / by[(largest, "full-fused")]["peak_bytes"], 2
        ),
        "largest_image": largest,
        "largest_tokens": tokens[-1],
    }
    if args.plot:
        plot_blocks(args.plot, args.images, by, tokens)
    return summary


def plot_blocks(path: str, images: list[int], by: dict, tokens: list[int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for kind in BLOCK_KINDS:
        axes[0].loglog(tokens, [by[(i, kind)]["seconds"] for i in images], marker="o", label=kind)
        axes[1].loglog(tokens, [by[(i, kind)]["peak_bytes"] for i in images], marker="o", label=kind)
    for ax, what in zip(axes, ("forward seconds (one block, measured)", "peak memory (bytes, measured)")):
        ax.set_xticks(tokens, [f"{n}\n({i}px)" for n, i in zip(tokens, images)])
        ax.minorticks_off()
        ax.set_xlabel("tokens N (image side, patch 16)")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.savefig(path, dpi=120)


# -- token merging ------------------------------------------------------------------------------------------


SCHEDULES = ("constant", "front-loaded")


def tome_schedule(schedule: str, r: int, depth: int) -> int | list[int]:
    """``r`` merges per block, or as many in all front-loaded (see ``vitlab.models.front_loaded``)."""
    return r if schedule == "constant" else front_loaded(r, depth)


def bench_tome(args: argparse.Namespace) -> dict:
    torch.manual_seed(0)
    model = build_registered("vit-tiny-patch16-224").eval()
    x = torch.randn(args.tome_batch, 3, 224, 224)
    fns = {("none", 0): lambda: model(x)}
    merged = {
        (schedule, r): apply_tome(model, tome_schedule(schedule, r, 12)) for r in args.tome_r for schedule in SCHEDULES
    }
    fns.update({key: (lambda m=m: m(x)) for key, m in merged.items()})
    with torch.no_grad():
        seconds = best_seconds(fns, args.rounds)
    speedups = {}
    for (schedule, r), s in seconds.items():
        speedups[f"{schedule} r={r}"] = round(seconds[("none", 0)] / s, 3)
        emit(
            {
                "bench": "tome_vit_tiny",
                "schedule": schedule,
                "r": r,
                "batch": args.tome_batch,
                "seconds": s,
                "images_per_second": args.tome_batch / s,
                "speedup": speedups[f"{schedule} r={r}"],
            }
        )
    return {"speedups": speedups}


def mnist_splits(data_dir: str) -> tuple[torch.Tensor, ...]:
    root = Path(data_dir)
    images, labels = read_idx_pair(root / "t10k-images-idx3-ubyte.gz", root / "t10k-labels-idx1-ubyte.gz", 10)
    x = (torch.from_numpy(images.copy()).float().div(255) - 0.1307).div(0.3081).unsqueeze(1)
    y = torch.from_numpy(labels.astype(np.int64))
    return x[:8000], y[:8000], x[8000:], y[8000:]


# 196 tokens of 2x2 pixels; deep and narrow so that attention (quadratic) is most of the work.
MNIST_VIT = ViTConfig(
    img_size=28,
    patch_size=2,
    in_chans=1,
    num_classes=10,
    embed_dim=32,
    depth=8,
    num_heads=2,
    mlp_ratio=2.0,
    class_token=False,
    pool="mean",
)


def train_mnist_vit(
    x: torch.Tensor, y: torch.Tensor, x_val: torch.Tensor, y_val: torch.Tensor, epochs: int, batch: int = 32
) -> VisionTransformer:
    """AdamW (3e-3, one warm-up epoch then cosine), label smoothing 0.1, gradients clipped at 1 -- the
    repository's small-data recipe; emits the validation accuracy after every epoch."""
    torch.manual_seed(0)
    model = VisionTransformer(MNIST_VIT)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    steps = epochs * (len(x) // batch)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=3e-3, total_steps=steps, pct_start=1 / epochs, anneal_strategy="cos"
    )
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(x))
        for i in range(len(x) // batch):
            idx = order[i * batch : (i + 1) * batch]
            loss = F.cross_entropy(model(x[idx]), y[idx], label_smoothing=0.1)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
        model.eval()
        emit(
            {
                "bench": "mnist_epoch",
                "epoch": epoch + 1,
                "loss": round(loss.item(), 4),
                "val_accuracy": round((predictions(model, x_val) == y_val).float().mean().item(), 4),
            }
        )
    return model.eval()


@torch.no_grad()
def predictions(model: torch.nn.Module, x: torch.Tensor, batch: int = 500) -> torch.Tensor:
    return torch.cat([model(x[i : i + batch]).argmax(-1) for i in range(0, len(x), batch)])


def bench_mnist(args: argparse.Namespace) -> dict:
    x_train, y_train, x_val, y_val = mnist_splits(args.data_dir)
    checkpoint = Path(args.mnist_checkpoint) if args.mnist_checkpoint else None
    start, loaded = time.perf_counter(), checkpoint is not None and checkpoint.exists()
    if loaded:
        model = VisionTransformer(MNIST_VIT).eval()
        model.load_state_dict(torch.load(checkpoint))
    else:
        model = train_mnist_vit(x_train, y_train, x_val, y_val, args.mnist_epochs)
        if checkpoint:
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            torch.save(model.state_dict(), checkpoint)
    train_seconds = time.perf_counter() - start
    reference = predictions(model, x_val)
    accuracy = (reference == y_val).float().mean().item()
    emit(
        {
            "bench": "mnist_vit",
            "tokens": 196,
            "train_images": len(x_train),
            "epochs": args.mnist_epochs,
            "loaded_from": str(checkpoint) if loaded else None,
            "train_seconds": round(train_seconds, 1),
            "val_accuracy": round(accuracy, 4),
        }
    )
    probe = x_val[:64]
    depth = len(model.blocks)
    merged = {
        (schedule, r): apply_tome(model, tome_schedule(schedule, r, depth))
        for r in args.mnist_r
        for schedule in SCHEDULES
    }
    with torch.no_grad():
        seconds = best_seconds(
            {("none", 0): lambda: model(probe), **{key: (lambda m=m: m(probe)) for key, m in merged.items()}},
            args.rounds,
        )
    results = []
    for (schedule, r), m in merged.items():
        pred = predictions(m, x_val)
        results.append(
            emit(
                {
                    "bench": "mnist_tome",
                    "schedule": schedule,
                    "r": r,
                    "per_block": list(m.r),
                    "speedup": round(seconds[("none", 0)] / seconds[(schedule, r)], 3),
                    "agreement": round((pred == reference).float().mean().item(), 4),
                    "val_accuracy": round((pred == y_val).float().mean().item(), 4),
                }
            )
        )
    at_1_5 = {}
    for schedule in SCHEDULES:
        fast = [row for row in results if row["schedule"] == schedule and row["speedup"] >= 1.5]
        if fast:
            row = min(fast, key=lambda row: row["r"])
            at_1_5[schedule] = {"r": row["r"], "speedup": row["speedup"], "agreement": row["agreement"]}
    return {"val_accuracy": round(accuracy, 4), "smallest_r_giving_1.5x": at_1_5}


# -- Swin against timm ---------------------------------------------------------------------------------------


def bench_swin(args: argparse.Namespace) -> dict:
    import timm

    torch.manual_seed(0)
    reference = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False).eval()
    model = from_timm(reference).eval()
    x = torch.randn(args.swin_batch, 3, 224, 224)
    with torch.no_grad():
        diff = (model(x) - reference(x)).abs().max().item()
        seconds = best_seconds({"vitlab": lambda: model(x), "timm": lambda: reference(x)}, args.rounds)
    for name, s in seconds.items():
        emit(
            {
                "bench": "swin_tiny_forward",
                "impl": name,
                "batch": args.swin_batch,
                "seconds": s,
                "images_per_second": args.swin_batch / s,
            }
        )
    return {"max_logit_difference": diff, "throughput_vitlab_over_timm": round(seconds["timm"] / seconds["vitlab"], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections, comma-separated: {', '.join(SECTIONS)}")
    parser.add_argument("--images", default="224,384,512,768,1024", help="image sides for the block section")
    parser.add_argument("--patch", type=int, default=16)
    parser.add_argument("--dim", type=int, default=192)
    parser.add_argument("--heads", type=int, default=3)
    parser.add_argument("--window", type=int, default=8)
    parser.add_argument("--rank", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tome-batch", type=int, default=8)
    parser.add_argument("--tome-r", default="8,13", help="r values for vit-tiny (each constant and front-loaded)")
    parser.add_argument("--data-dir", help="folder with MNIST's t10k IDX files (the mnist section needs it)")
    parser.add_argument("--mnist-epochs", type=int, default=12)
    parser.add_argument(
        "--mnist-r", default="16,24,28,32", help="r values for the MNIST ViT (each constant and front-loaded)"
    )
    parser.add_argument(
        "--mnist-checkpoint",
        default="runs/bench_attention/mnist_vit.pt",
        help="load the trained MNIST ViT from here if present, else train and save it there ('' to always train)",
    )
    parser.add_argument("--swin-batch", type=int, default=2)
    parser.add_argument("--plot", help="PNG of the block section's measured time and memory against N (log-log)")
    args = parser.parse_args()
    args.images = [int(v) for v in args.images.split(",")]
    args.tome_r = [int(v) for v in args.tome_r.split(",")]
    args.mnist_r = [int(v) for v in args.mnist_r.split(",")]
    sections = [s.strip() for s in args.only.split(",")]
    if "mnist" in sections and not args.data_dir:
        sections.remove("mnist")
    torch.set_num_threads(args.threads)
    emit(
        {
            "bench": "machine",
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "threads": args.threads,
            "torch": torch.__version__,
            "load_average": [round(v, 2) for v in os.getloadavg()],
        }
    )
    start = time.perf_counter()
    summary = {
        name: {"blocks": bench_blocks, "tome": bench_tome, "mnist": bench_mnist, "swin": bench_swin}[name](args)
        for name in sections
    }
    goals = {}
    if "blocks" in summary:
        goals["window_peak_memory_saving_at_4096_tokens>=8"] = summary["blocks"]["window_memory_saving_at_largest"] >= 8
        goals["window_time_exponent<=1.2"] = summary["blocks"]["exponents"]["window"]["all"] <= 1.2
        goals["sparse_peak_memory_saving_at_4096_tokens>=4"] = summary["blocks"]["sparse_memory_saving_at_largest"] >= 4
        goals["sparse_time_exponent<=1.5"] = summary["blocks"]["exponents"]["sparse"]["all"] <= 1.5
    if "tome" in summary:
        for schedule in SCHEDULES:
            goals[f"tome_{schedule}_r8_speedup>=1.5"] = summary["tome"]["speedups"].get(f"{schedule} r=8", 0) >= 1.5
    if "mnist" in summary:
        for schedule, row in summary["mnist"]["smallest_r_giving_1.5x"].items():
            goals[f"mnist_{schedule}_agreement_at_1.5x>=0.95"] = row["agreement"] >= 0.95
    if "swin" in summary:
        goals["swin_logits<=1e-5"] = summary["swin"]["max_logit_difference"] <= 1e-5
        goals["swin_throughput>=timm"] = summary["swin"]["throughput_vitlab_over_timm"] >= 1.0
    emit(
        {
            "bench": "summary",
            **summary,
            "goals": goals,
            "seconds": round(time.perf_counter() - start, 1),
            "load_average_after": [round(v, 2) for v in os.getloadavg()],
        }
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
