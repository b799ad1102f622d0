"""Sparse attention in the cost model: entries are the blocked kernel's slots (the pattern's pairs and a few more),
its FLOPs PyTorch's count of that kernel; the explicit (masked) path does full attention's work."""

import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import vitlab.layers.sparse_attention as sparse_module
from vitlab.analysis.cost import Workload, attention_cost, flops
from vitlab.cli.main import main
from vitlab.layers import SparseAttention
from vitlab.models import VisionTransformer, ViTConfig


@pytest.mark.parametrize(
    "image, patch, local, stride, class_token",
    [
        (32, 4, None, None, False),
        (32, 4, 2, 3, True),
        (48, 4, 0, 5, False),
        (28, 2, 20, 7, True),
        (16, 4, 100, 1, False),
    ],
)
def test_flops_are_the_blocked_kernels_and_entries_cover_the_pattern(
    image, patch, local, stride, class_token, monkeypatch
):
    monkeypatch.setattr(sparse_module, "BLOCKED_FROM", 0)
    grid = (image // patch, image // patch)
    work = Workload(
        image, patch, dim=16, heads=2, batch=3, class_token=class_token, sparse_local=local, sparse_stride=stride
    )
    cost = attention_cost(work, "sparse")
    layer = SparseAttention(16, 2, grid=grid, local=local, stride=stride, global_tokens=int(class_token)).eval()
    pairs = int(layer.allowed(work.tokens, torch.device("cpu")).sum())
    assert pairs <= cost.entries <= 2 * pairs + 4 * work.tokens  # each pair once, plus padding and masked slots
    assert cost.memory == 3 * 2 * cost.entries * 4
    counter = FlopCounterMode(display=False)
    x = torch.randn(3, work.tokens, 16)
    with counter, torch.no_grad():
        layer(x)
    projections = 2 * 3 * work.tokens * 16 * 16 * 4  # qkv (3 D) and proj (D) per token
    assert counter.get_total_flops() == cost.score_flops + cost.value_flops + projections


def test_the_explicit_path_computes_full_attentions_flops():
    config = ViTConfig(
        img_size=32,
        patch_size=4,
        num_classes=0,
        embed_dim=24,
        depth=2,
        num_heads=3,
        class_token=False,
        pool="mean",
        attention="sparse",
        sparse_local=2,
        sparse_stride=4,
    )
    model = VisionTransformer(config).eval()
    for block in model.blocks:
        block.attn.fused = False
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(torch.randn(2, 3, 32, 32))
    work = Workload(32, 4, dim=24, depth=2, heads=3, batch=2, sparse_local=2, sparse_stride=4)
    assert counter.get_total_flops() == flops(work, "full")["total"]
    assert flops(work, "sparse")["total"] < flops(work, "full")["total"]


def test_growth_is_n_to_the_1_5_with_grid_width_band_and_stride():
    entries = [attention_cost(Workload(image, 16, dim=192, heads=3), "sparse").entries for image in (512, 2048)]
    assert 60 < entries[1] / entries[0] < 70  # side x4: N x16, N^1.5 x64 (full attention's N^2: x256)
    assert entries[0] < 5 * 1024**1.5  # ~ 4 N^1.5: a band of 3 blocks of sqrt(N) and sqrt(N) strided keys


def test_cli_prices_sparse(capsys):
    assert (
        main(
            ["cost", "--image", "64,128", "--patch", "8", "--attention", "full,sparse", "--sparse-local", "2", "--json"]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)["attention"]["sparse"]
    assert rows[0]["entries"] == attention_cost(Workload(64, 8, sparse_local=2), "sparse").entries
    assert main(["cost", "--attention", "sparse", "--sparse-stride", "0"]) == 2
