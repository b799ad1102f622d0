"""``vitlab compare --task segment``: dense heads side by side by patch size (:mod:`vitlab.experiments.segment`)."""

import pytest

from vitlab.cli.main import main
from vitlab.errors import ConfigError
from vitlab.tasks.dense import DenseTrainConfig


@pytest.mark.slow
def test_compare_heads_rows():
    from vitlab.experiments.segment import compare_heads, heads_table

    small = {"embed_dim": 32, "depth": 1, "num_heads": 2, "decoder_width": 16}
    config = DenseTrainConfig(count=20, image_size=32, epochs=1, device="cpu", model=small)
    rows = compare_heads(("linear", "decoder"), (8,), config)
    assert [(r["head"], r["patch"]) for r in rows] == [("linear", 8), ("decoder", 8)]
    assert all(0 <= r["boundary_acc"] <= 1 for r in rows)
    assert heads_table(rows).count("\n") == 3


def test_compare_refuses_zero_epochs(tmp_path, capsys):
    from vitlab.experiments.segment import compare_heads

    with pytest.raises(ConfigError, match="epochs must be"):
        compare_heads(("linear",), (8,), DenseTrainConfig(epochs=0))
    assert main(["compare", "--task", "segment", "--epochs", "0", "--patches", "8", "--out", str(tmp_path)]) == 2
    assert "epochs must be a positive integer" in capsys.readouterr().err


def test_cli_compare_segment_passes_the_time_limit(tmp_path, monkeypatch, capsys):
    import vitlab.experiments.segment as segment

    seen = {}

    def fake_compare_heads(heads, patches, config, progress=None):
        seen.update(time_limit_s=config.time_limit_s, epochs=config.epochs, heads=heads, patches=patches)
        return [
            {"head": h, "patch": p, "mean_iou": 0.5, "pixel_acc": 0.9, "boundary_acc": 0.4, "params": 1, "seconds": 1.0}
            for p in patches
            for h in heads
        ]

    monkeypatch.setattr(segment, "compare_heads", fake_compare_heads)
    assert (
        main(
            [
                "compare",
                "--task",
                "segment",
                "--head",
                "linear,decoder",
                "--patches",
                "8",
                "--minutes",
                "2.5",
                "--out",
                str(tmp_path / "h"),
            ]
        )
        == 0
    )
    assert seen["time_limit_s"] == 150 and seen["patches"] == [8] and seen["epochs"] == 30
    assert (tmp_path / "h" / "heads.md").read_text().count("| 8 |") == 2
    assert main(["compare", "--task", "segment", "--patches", "8", "--out", str(tmp_path / "h2")]) == 0
    assert seen["time_limit_s"] is None
