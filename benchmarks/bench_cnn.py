"""vitlab's CNN against the same network written plainly in torch, measured alternately in one process.

    python benchmarks/bench_cnn.py                  # CPU, 1 thread: train step (batch 64, Adam) and scoring
    python benchmarks/bench_cnn.py --threads 2 --device cuda

The network is the size-matched CNN of the textbook study: :func:`vitlab.models.cnn_for_budget` at
``vit-seed``'s parameter count for 28x28x1 images and 10 classes. Its plain twin is an
``nn.Sequential`` of the same convolutions, BatchNorms, ReLUs, max-pools, global average pool and
linear head, starting from vitlab's weights (so both compute the same function), in PyTorch's
default NCHW layout. Each side does a training step (forward, cross-entropy, backward, Adam) on a
batch of 64 and scores 6,000 images in eval mode under ``no_grad`` (the validation split of the
study) in batches of ``--eval-batch`` (default: vitlab's own default on the device); the two sides
run in rounds (:func:`vitlab.engine.measure.best_seconds`, best of ``--rounds``).

Prints one JSON line: images per second of each side and the ratios vitlab/plain (>1: vitlab faster),
and the largest difference between the two sides' validation logits after one step each.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
from collections.abc import Iterable
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

import vitlab
from vitlab.engine.evaluate import eval_batch_size
from vitlab.engine.measure import best_seconds
from vitlab.models import SimpleCNN, build_registered, cnn_for_budget, count_params
from vitlab.models.cnn import ConvNormAct, Stage


def plain_twin(model: SimpleCNN) -> nn.Sequential:
    """``model`` as an ``nn.Sequential`` of torch layers (NCHW), with a copy of its weights and buffers."""
    layers: list[nn.Module] = []
    for stage in cast(Iterable[Stage], model.stages):
        if isinstance(stage.pool, nn.MaxPool2d):
            layers.append(nn.MaxPool2d(2))
        for block in cast(Iterable[ConvNormAct], stage.blocks):
            layers += [copy.deepcopy(block.conv), copy.deepcopy(block.norm), nn.ReLU(inplace=True)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), copy.deepcopy(model.hidden), copy.deepcopy(model.head)]
    return nn.Sequential(*[layer for layer in layers if not isinstance(layer, nn.Identity)])


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, images: torch.Tensor, labels: torch.Tensor):
    def step() -> None:
        model.train()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def score(model: nn.Module, images: torch.Tensor, batch: int):
    @torch.no_grad()
    def run() -> torch.Tensor:
        model.eval()
        return torch.cat([model(chunk) for chunk in images.split(batch)])

    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--eval-batch", type=int, default=0, help="scoring batch (0: vitlab's default on the device)")
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    config = cnn_for_budget(count_params(build_registered("vit-seed")), img_size=28, in_chans=1, num_classes=10)
    ours = SimpleCNN(config).to(device)
    plain = plain_twin(ours).to(device)
    images = torch.rand(64, 1, 28, 28, device=device)
    labels = torch.randint(0, 10, (64,), device=device)
    val = torch.rand(6000, 1, 28, 28, device=device)
    batch = args.eval_batch or eval_batch_size(device)

    steps = {
        "vitlab": train_step(ours, torch.optim.Adam(ours.parameters(), 1e-3), images, labels),
        "plain": train_step(plain, torch.optim.Adam(plain.parameters(), 1e-3), images, labels),
    }
    scores = {"vitlab": score(ours, val, batch), "plain": score(plain, val, batch)}
    for step in steps.values():  # one step each, then both should compute the same function
        step()
    logits_gap = (scores["vitlab"]() - scores["plain"]()).abs().max().item()
    train_s = best_seconds(steps, rounds=args.rounds, min_seconds=0.5)
    eval_s = best_seconds(scores, rounds=args.rounds, min_seconds=0.5)

    train_ips = {k: round(len(images) / v, 1) for k, v in train_s.items()}
    eval_ips = {k: round(len(val) / v, 1) for k, v in eval_s.items()}
    print(
        json.dumps(
            {
                "benchmark": "cnn",
                "machine": platform.processor() or platform.machine(),
                "torch": torch.__version__,
                "vitlab": vitlab.__version__,
                "device": str(device),
                "threads": torch.get_num_threads(),
                "widths": list(config.widths),
                "params": count_params(ours),
                "train_batch": len(images),
                "train_images_per_s": train_ips,
                "train_ratio_vitlab_over_plain": round(train_ips["vitlab"] / train_ips["plain"], 3),
                "eval_batch": batch,
                "eval_images_per_s": eval_ips,
                "eval_ratio_vitlab_over_plain": round(eval_ips["vitlab"] / eval_ips["plain"], 3),
                "max_logit_difference": logits_gap,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
