"""benchmarks/capacity.py: its FLOPs are vitlab's cost model's (what `vitlab cost` prints), its days scale as 1/N."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from capacity import DATASETS, MODELS, forward_flops, plan  # noqa: E402
from vitlab.cli.main import main  # noqa: E402
from vitlab.models.registry import get_config  # noqa: E402


def test_vit_b_forward_flops_are_what_vitlab_cost_prints_for_the_registered_model(capsys):
    config = get_config("vit-base-patch16-224")
    sizes = MODELS["ViT-B/16"]
    assert (config.patch_size, config.embed_dim, config.depth, config.num_heads) == tuple(sizes.values())
    argv = ["cost", "--pairs", "224/16", "--class-token", "--json", "--attention", "full"]
    assert main([*argv, "--dim", "768", "--depth", "12", "--heads", "12"]) == 0
    printed = json.loads(capsys.readouterr().out)["rows"][0]["flops"]
    assert abs(forward_flops("ViT-B/16") / printed - 1) < 0.01
    assert 34e9 < printed < 36e9  # ViT-B/16 is 17.6 G multiply-adds at 224 px


def test_the_plan_is_consistent():
    out = plan(peak_tflops=1000.0, mfu=0.5, gpus=[1, 8, 64], jpeg_kib=100.0, reencoded_kib=20.0, cpu_ms=2.0,
               decode_gpu_cpu_ms=0.5)  # fmt: skip
    assert len(out["rows"]) == len(MODELS) * len(DATASETS)
    for row in out["rows"]:
        d = DATASETS[row["dataset"]]
        forward = forward_flops(row["model"])
        total = 3 * forward * d["images"] * d["epochs"]
        assert abs(row["train_flops"] / total - 1) < 1e-3
        assert abs(row["days"]["1"] - total / 5e14 / 86400) <= 0.01
        for n in (8, 64):
            assert abs(row["days"][str(n)] - row["days"]["1"] / n) <= 0.01
        assert abs(row["images_per_s_per_gpu"] - 5e14 / (3 * forward)) <= 1
        assert abs(row["cpu_cores_per_gpu"] / row["cpu_cores_per_gpu_decode_gpu"] - 4) < 0.2
    b, h = (next(r for r in out["rows"] if r["model"] == m and r["dataset"] == "ImageNet-1k") for m in
            ("ViT-B/16", "ViT-H/14"))  # fmt: skip
    assert b["images_per_s_per_gpu"] > 5 * h["images_per_s_per_gpu"]  # a bigger model needs fewer images/s
    assert abs(out["storage"]["ImageNet-1k"]["original_gib"] - 1_281_167 * (100 * 1024 + 1792) / 2**30) < 0.1
