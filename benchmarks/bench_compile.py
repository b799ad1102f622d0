"""``torch.compile`` speed-up: vitlab's vit-tiny-patch16-224 against timm's vit_tiny_patch16_224, each
eager and compiled the same way (``torch.compile(model)``, default mode), measured in one process.

    python benchmarks/bench_compile.py --threads 2        # CPU, fp32, no grad, batch 32

Both models get the same weights (timm's, converted), so they compute the same function. Each round
times the four forwards with :func:`vitlab.engine.measure.best_seconds`, the order reversed every
other round (the second to run gains from a warm cache); the best round counts. Prints one JSON line
per model ({"model", "images_per_s"}) and a summary line with the speed-ups and the ratio
vitlab_compiled / timm_compiled (goal >= 1.0).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from collections.abc import Callable

import torch

from vitlab.engine.measure import best_seconds
from vitlab.interop import from_timm


def alternating_best(fns: dict[str, Callable[[], object]], rounds: int, min_seconds: float) -> dict[str, float]:
    """Seconds per call of each function: the best over ``rounds`` rounds, every other one reversed."""
    best = {name: float("inf") for name in fns}
    for round_ in range(rounds):
        order = list(fns.items()) if round_ % 2 == 0 else list(fns.items())[::-1]
        for name, seconds in best_seconds(dict(order), rounds=1, min_seconds=min_seconds).items():
            best[name] = min(best[name], seconds)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--min-seconds", type=float, default=1.0, help="each timing repeats a call this long")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import timm

    torch.manual_seed(0)
    timm_model = timm.create_model("vit_tiny_patch16_224", pretrained=False).eval()
    vitlab_model = from_timm(timm_model).eval()
    images = torch.randn(args.batch, 3, 224, 224)
    with torch.no_grad():
        gap = (vitlab_model(images) - timm_model(images)).abs().max().item()
    models: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "vitlab eager": vitlab_model,
        "vitlab compiled": torch.compile(vitlab_model),
        "timm eager": timm_model,
        "timm compiled": torch.compile(timm_model),
    }

    def forward(model: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], object]:
        def run() -> object:
            with torch.no_grad():
                return model(images)

        return run

    with torch.no_grad():
        for name in ("vitlab compiled", "timm compiled"):  # compile (and check) outside the timing
            gap = max(gap, (models[name](images) - timm_model(images)).abs().max().item())
    seconds = alternating_best({name: forward(m) for name, m in models.items()}, args.rounds, args.min_seconds)
    rate = {name: args.batch / s for name, s in seconds.items()}
    for name in models:
        print(json.dumps({"model": name, "images_per_s": round(rate[name], 2), "batch": args.batch}))
    print(
        json.dumps(
            {
                "summary": "vit-tiny-patch16-224 forward, fp32, no grad, CPU",
                "vitlab_speedup": round(rate["vitlab compiled"] / rate["vitlab eager"], 3),
                "timm_speedup": round(rate["timm compiled"] / rate["timm eager"], 3),
                "vitlab_compiled_over_timm_compiled": round(rate["vitlab compiled"] / rate["timm compiled"], 3),
                "vitlab_eager_over_timm_eager": round(rate["vitlab eager"] / rate["timm eager"], 3),
                "max_logit_gap": gap,
                "threads": torch.get_num_threads(),
                "load_average": os.getloadavg()[0],
                "torch": torch.__version__,
                "timm": timm.__version__,
                "cpu": platform.processor() or platform.machine(),
            }
        )
    )


if __name__ == "__main__":
    main()
