"""The cost model per kind of attention against PyTorch's FLOP counter and real tensors; `vitlab cost`."""

import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from vitlab.analysis.cost import ATTENTION_COSTS, Workload, attention_cost, flops
from vitlab.cli.main import main
from vitlab.layers import window_attention
from vitlab.models import VisionTransformer, ViTConfig
from vitlab.ops.attention import scaled_dot_product_attention
from vitlab.ops.windows import window_layout

OPTIONS = dict(window_size=3, lowrank_k=5, num_latents=3)


@pytest.mark.parametrize("kind", [k for k in ATTENTION_COSTS if k != "sparse"])  # sparse: test_cost_sparse.py
@pytest.mark.parametrize("image, patch, dim, heads, batch", [(32, 4, 32, 4, 2), (28, 4, 24, 3, 1)])
def test_flops_match_a_measured_count(kind, image, patch, dim, heads, batch):
    config = ViTConfig(
        img_size=image,
        patch_size=patch,
        in_chans=3,
        num_classes=0,
        embed_dim=dim,
        depth=2,
        num_heads=heads,
        class_token=False,
        pool="mean",
        attention=kind,
        **OPTIONS,
    )
    model = VisionTransformer(config).eval()
    for block in model.blocks:  # the explicit path: its matmuls are counted, the CPU fused kernel's are not
        block.attn.fused = False
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(torch.randn(batch, 3, image, image))
    work = Workload(image, patch, dim=dim, depth=2, heads=heads, batch=batch, **OPTIONS)
    assert flops(work, kind)["total"] == counter.get_total_flops()


def test_window_entries_and_memory_are_the_real_per_window_weights(monkeypatch):
    grid, window = (7, 7), 3  # padded to 9x9: 9 windows
    cost = attention_cost(Workload(28, 4, dim=16, heads=2, batch=2, window_size=window), "window")
    layout = window_layout(grid, (window, window))
    assert cost.entries == layout.index.shape[0] * layout.index.shape[1] ** 2 == 9 * 81
    seen = []

    def spy(q, k, v, **kwargs):  # keep the weights formed
        out, weights = scaled_dot_product_attention(q, k, v, **{**kwargs, "need_weights": True})
        seen.append(weights)
        return out, weights

    monkeypatch.setattr(window_attention, "scaled_dot_product_attention", spy)
    window_attention.WindowAttention(16, 2, grid=grid, window_size=window)(torch.randn(2, 49, 16))
    assert cost.memory == seen[0].numel() * seen[0].element_size()


def test_growth_with_tokens():
    def memory(kind, image):
        return attention_cost(Workload(image, 16, dim=192, heads=3, window_size=8), kind).memory

    assert memory("full", 1024) == 16 * memory("full", 512)  # N^2
    assert memory("window", 1024) == 4 * memory("window", 512)  # N (64 and 32: whole windows)
    assert memory("linear", 1024) == memory("linear", 512)  # constant
    assert memory("lowrank", 1024) == 4 * memory("lowrank", 512)
    assert memory("full", 1024) / memory("window", 1024) == 4096 / 64


def test_cli_prices_every_kind_as_json(capsys):
    assert (
        main(
            [
                "cost",
                "--image",
                "64,128",
                "--patch",
                "16",
                "--attention",
                "all",
                "--window",
                "2",
                "--json",
                "--dim",
                "64",
                "--heads",
                "4",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert set(report["attention"]) == set(ATTENTION_COSTS) - {"full"}
    for kind, rows in report["attention"].items():
        for row in rows:
            work = Workload(row["image"], row["patch"], dim=64, heads=4, window_size=2)
            assert row["attention_memory"] == attention_cost(work, kind).memory
            assert row["flops"] == flops(work, kind)["total"]


def test_cli_table_grows_columns_and_plots(tmp_path, capsys):
    plot = tmp_path / "cost.png"
    assert main(["cost", "--image", "224,448", "--patch", "16", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "FLOPs window" in out and "mem linear" in out and plot.stat().st_size > 10_000
    assert main(["cost", "--pairs", "28/7,224/16", "--plot", str(tmp_path / "pairs.png")]) == 2  # two patch sizes
    assert "one patch size" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["cost", "--attention", "dilated"])
