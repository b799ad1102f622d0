"""Forward cost measurement: peak memory counts what a call allocates, and costs come per model."""

import torch
from torch import nn

from vitlab.engine.measure import best_seconds, forward_costs, peak_memory


def test_peak_memory_sees_a_short_lived_intermediate():
    def scores() -> torch.Tensor:
        big = torch.ones(512, 512)  # 1 MiB, freed before the call returns
        return big.sum(dim=0)

    assert 2**20 <= peak_memory(scores) < 2 * 2**20
    assert peak_memory(lambda: None) == 0


def test_forward_costs_per_model_and_bigger_models_need_more_memory():
    images = torch.randn(16, 8)
    models = {"small": nn.Linear(8, 4), "wide": nn.Sequential(nn.Linear(8, 4096), nn.ReLU(), nn.Linear(4096, 4))}
    costs = forward_costs(models, images, rounds=1, min_seconds=0.01)
    assert set(costs) == {"small", "wide"}
    assert all(c["images_per_s"] > 0 for c in costs.values())
    # the wide model's (16, 4096) hidden activations: 256 KiB, twice (Linear out, ReLU out)
    assert costs["wide"]["peak_mb"] >= 0.25 > costs["small"]["peak_mb"]
    assert not models["wide"].training


def test_best_seconds_calls_each_function():
    calls = {"a": 0, "b": 0}

    def count(name: str):
        def fn() -> None:
            calls[name] += 1

        return fn

    seconds = best_seconds({name: count(name) for name in calls}, rounds=2, min_seconds=0.0)
    assert set(seconds) == {"a", "b"} and calls == {"a": 3, "b": 3}  # one warm-up call, one per round
