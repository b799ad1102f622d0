"""Measured cost of a forward pass: wall time per call and peak memory.

    best_seconds({"full": lambda: a(x), "window": lambda: b(x)}, rounds=5)   # seconds per call, best round
    peak_memory(lambda: model(x))                                           # bytes beyond what was live
    forward_costs({"a": a, "b": b}, images)          # per model: {"images_per_s", "peak_mb"}

Timing takes the best of alternating rounds (each round repeats a call for at least
``min_seconds``), so two functions measured together see the same machine state. Peak memory on the
CPU comes from the profiler's allocator events (allocations minus frees, in time order); on CUDA it
is ``torch.cuda.max_memory_allocated`` after a reset — the same quantity.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile


def best_seconds(
    fns: Mapping[str, Callable[[], object]], rounds: int = 3, min_seconds: float = 0.2
) -> dict[str, float]:
    """Seconds per call of each function: best of ``rounds`` rounds run alternately (after one
    warm-up call each), each round repeating a call until ``min_seconds`` have passed."""
    for fn in fns.values():
        fn()
    best = {name: math.inf for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            calls, start = 0, time.perf_counter()
            while True:
                fn()
                calls += 1
                elapsed = time.perf_counter() - start
                if elapsed >= min_seconds:
                    break
            best[name] = min(best[name], elapsed / calls)
    return best


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 (which C++ libraries write to directly) to the null device for a while."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def peak_memory(fn: Callable[[], object], device: torch.device | str = "cpu") -> int:
    """Peak bytes allocated by PyTorch during ``fn()`` beyond what was live before it."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():  # the profiler's backend logs its start and stop there
        prof.start()
    try:
        fn()
    finally:
        with _quiet_stderr():
            prof.stop()
    results = prof.profiler.kineto_results if prof.profiler is not None else None
    if results is None:
        raise RuntimeError(
            "the PyTorch profiler recorded no events, so peak memory is unknown: is another profiler running?"
        )
    memory = [e for e in results.events() if e.name() == "[memory]"]
    events = sorted((e.start_ns(), e.nbytes()) for e in memory)  # type: ignore[attr-defined]  # not in torch's stubs
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


@torch.no_grad()
def forward_costs(
    models: dict[str, nn.Module], images: torch.Tensor, rounds: int = 5, min_seconds: float = 0.1
) -> dict[str, dict[str, float]]:
    """Inference cost of each model on one batch ``images (B, C, H, W)`` (on the models' device, eval
    mode), measured together in alternating rounds so that a change of machine load hits all alike:
    per name, ``images_per_s`` (best of ``rounds``) and ``peak_mb`` (peak forward memory, MiB)."""
    device = images.device

    def call(model: nn.Module) -> Callable[[], None]:
        def run() -> None:
            model(images)
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        return run

    for model in models.values():
        model.eval()
    calls = {name: call(model) for name, model in models.items()}
    seconds = best_seconds(calls, rounds, min_seconds)
    return {
        name: {"images_per_s": len(images) / seconds[name], "peak_mb": peak_memory(fn, device) / 2**20}
        for name, fn in calls.items()
    }
