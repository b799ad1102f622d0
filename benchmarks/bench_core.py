"""Core speed: vitlab against timm on the same architectures, measured alternately in one process.

    python benchmarks/bench_core.py            # CPU: fp32, forward batch 32, train batch 128
    python benchmarks/bench_core.py --device cuda   # GPU: bf16 autocast, larger batches, MFU

Prints one JSON line per measurement and a summary line with the ratios vitlab/timm (>1: vitlab
faster) and achieved GFLOP/s against the machine's measured matmul peak.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from contextlib import nullcontext

import torch
from torch.utils.flop_counter import FlopCounterMode

import vitlab


def timm_twin(name: str) -> torch.nn.Module:
    """timm's VisionTransformer with the architecture of the vitlab model ``name``."""
    import timm

    cfg = vitlab.models.get_config(name)
    return timm.models.vision_transformer.VisionTransformer(
        img_size=cfg.img_size,
        patch_size=cfg.patch_size,
        in_chans=cfg.in_chans,
        num_classes=cfg.num_classes,
        embed_dim=cfg.embed_dim,
        depth=cfg.depth,
        num_heads=cfg.num_heads,
        mlp_ratio=cfg.mlp_ratio,
        class_token=cfg.class_token,
        global_pool="token" if cfg.pool == "token" else "avg",
        fc_norm=cfg.fc_norm,
    )


def matmul_peak(device: str, dtype: torch.dtype, size: int = 2048, repeats: int = 10) -> float:
    """Measured matmul throughput in GFLOP/s: the practical peak this machine reaches."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    best = 0.0
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        a @ b
        sync(device)
        best = max(best, 2 * size**3 / (time.perf_counter() - start) / 1e9)
    return best


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def flops_of(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def bench_pair(step_fns: dict[str, callable], device: str, rounds: int, iters: int) -> dict[str, float]:
    """Seconds per call of each function, best of ``rounds`` rounds run alternately.

    The order flips every round: whichever model runs second in a round gains a few percent from
    the warm allocator and caches, a bias that would otherwise favour one side every time.
    """
    for fn in step_fns.values():  # warm-up
        fn()
    best = {k: float("inf") for k in step_fns}
    for round_ in range(rounds):
        order = list(step_fns.items())
        for key, fn in order if round_ % 2 == 0 else order[::-1]:
            sync(device)
            start = time.perf_counter()
            for _ in range(iters):
                fn()
            sync(device)
            best[key] = min(best[key], (time.perf_counter() - start) / iters)
    return best


def forward_bench(name: str, batch: int, device: str, autocast, rounds: int, iters: int) -> dict:
    torch.manual_seed(0)
    models = {"vitlab": vitlab.create_model(name).to(device).eval(), "timm": timm_twin(name).to(device).eval()}
    cfg = vitlab.models.get_config(name)
    x = torch.randn(batch, cfg.in_chans, *cfg.img_size, device=device)

    def step(m):
        def run():
            with torch.inference_mode(), autocast():
                m(x)

        return run

    seconds = bench_pair({k: step(m) for k, m in models.items()}, device, rounds, iters)
    flops = {k: flops_of(lambda m=m: m(x)) for k, m in models.items()}  # vitlab's last block reads the class token only
    return {
        "bench": "forward",
        "model": name,
        "batch": batch,
        **{f"{k}_flops_per_call": f for k, f in flops.items()},
        **{f"{k}_images_per_s": batch / s for k, s in seconds.items()},
        **{f"{k}_gflops": flops[k] / s / 1e9 for k, s in seconds.items()},
        "ratio_vitlab_over_timm": seconds["timm"] / seconds["vitlab"],
    }


def train_bench(name: str, batch: int, device: str, autocast, rounds: int, iters: int) -> dict:
    torch.manual_seed(0)
    models = {"vitlab": vitlab.create_model(name).to(device).train(), "timm": timm_twin(name).to(device).train()}
    cfg = vitlab.models.get_config(name)
    x = torch.randn(batch, cfg.in_chans, *cfg.img_size, device=device)
    y = torch.randint(0, cfg.num_classes, (batch,), device=device)
    optims = {k: torch.optim.AdamW(m.parameters(), lr=1e-3) for k, m in models.items()}

    def step(key):
        model, opt = models[key], optims[key]

        def run():
            with autocast():
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return run

    seconds = bench_pair({k: step(k) for k in models}, device, rounds, iters)

    def fwd_bwd():
        torch.nn.functional.cross_entropy(models["vitlab"](x), y).backward()

    flops = flops_of(fwd_bwd)
    models["vitlab"].zero_grad(set_to_none=True)
    return {
        "bench": "train_step",
        "model": name,
        "batch": batch,
        "flops_per_call": flops,
        **{f"{k}_images_per_s": batch / s for k, s in seconds.items()},
        **{f"{k}_gflops": flops / s / 1e9 for k, s in seconds.items()},
        "ratio_vitlab_over_timm": seconds["timm"] / seconds["vitlab"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave the default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    gpu = args.device == "cuda"
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if gpu else nullcontext
    peak_dtype = torch.bfloat16 if gpu else torch.float32
    peak = matmul_peak(args.device, peak_dtype, size=8192 if gpu else 2048)
    machine = (
        torch.cuda.get_device_name()
        if gpu
        else f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
    )
    print(
        json.dumps(
            {
                "bench": "matmul_peak",
                "device": args.device,
                "dtype": str(peak_dtype),
                "gflops": peak,
                "machine": machine,
            }
        )
    )
    results = [
        forward_bench("vit-tiny-patch16-224", 256 if gpu else 32, args.device, autocast, args.rounds, 20 if gpu else 3),
        train_bench("vit-seed", 1024 if gpu else 128, args.device, autocast, args.rounds, 20 if gpu else 10),
    ]
    if gpu:
        results.append(train_bench("vit-base-patch16-224", 128, args.device, autocast, args.rounds, 5))
    for r in results:
        r["vitlab_fraction_of_peak"] = r["vitlab_gflops"] / peak
        r["timm_fraction_of_peak"] = r["timm_gflops"] / peak
        print(json.dumps(r))
    print(
        json.dumps(
            {
                "bench": "summary",
                "device": args.device,
                "matmul_peak_gflops": round(peak, 1),
                **{f"{r['bench']}:{r['model']}_ratio": round(r["ratio_vitlab_over_timm"], 3) for r in results},
            }
        )
    )


if __name__ == "__main__":
    main()
