"""End to end, tiny: train -> checkpoint -> evaluate -> predict overlay, through the CLI too."""
import pytest
from PIL import Image

from vitlab.cli.main import main
from vitlab.dense import DenseTrainConfig, evaluate_dense_checkpoint, predict_file, train_dense

TINY = {"embed_dim": 32, "depth": 2, "num_heads": 2, "decoder_width": 16, "num_queries": 6}


@pytest.mark.parametrize("task,head", [("segment", "decoder"), ("detect", "detr")])
def test_train_evaluate_predict(tmp_path, task, head):
    cfg = DenseTrainConfig(task=task, head=head, count=24, image_size=32, epochs=1, batch_size=8,
                           out_dir=str(tmp_path / "run"), model=TINY)
    result = train_dense(cfg)
    assert len(result.history) == 1
    report = evaluate_dense_checkpoint(tmp_path / "run")
    keys = ("pixel_acc", "mean_iou") if task == "segment" else ("map", "map50")
    assert all(0.0 <= report[k] <= 1.0 for k in keys)
    assert report == {**report, **{k: result.test[k] for k in keys}}  # evaluate reproduces the test figures
    Image.new("RGB", (40, 40), (200, 10, 10)).save(tmp_path / "img.png")
    out = predict_file(tmp_path / "run", tmp_path / "img.png", tmp_path / "overlay.png")
    assert Image.open(out).size == (128, 128)


def test_cli_train_evaluate_predict(tmp_path, capsys):
    run = str(tmp_path / "run")
    assert main(["train", "--task", "segment", "--head", "linear", "--dataset", "shapes", "--epochs", "1",
                 "--batch-size", "8", "--out", run, "--set", "count=20", "--set", "image_size=32",
                 "--set", "embed_dim=32", "--set", "depth=1", "--set", "num_heads=2"]) == 0
    assert "mean IoU" in capsys.readouterr().out
    assert main(["evaluate", run]) == 0
    assert "pixel accuracy" in capsys.readouterr().out
    Image.new("RGB", (32, 32)).save(tmp_path / "img.png")
    assert main(["predict", run, str(tmp_path / "img.png"), "--out", str(tmp_path / "o.png")]) == 0
    assert (tmp_path / "o.png").is_file()


def test_compare_heads_rows():
    from vitlab.dense.compare import compare_heads, heads_table

    rows = compare_heads(("linear", "decoder"), (8,), count=20, image_size=32, epochs=1,
                         model={"embed_dim": 32, "depth": 1, "num_heads": 2, "decoder_width": 16})
    assert [(r["head"], r["patch"]) for r in rows] == [("linear", 8), ("decoder", 8)]
    assert all(0 <= r["boundary_acc"] <= 1 for r in rows)
    assert heads_table(rows).count("\n") == 3


def test_dense_options_split_into_run_and_model_and_reject_unknown_ones():
    from vitlab.dense import dense_train_config

    cfg = dense_train_config({"task": "segment", "head": "decoder", "epochs": 3, "patch_size": 4})
    assert cfg.epochs == 3 and cfg.model == {"patch_size": 4}
    with pytest.raises(ValueError, match="unknown dense option"):
        dense_train_config({"bogus": 1})


def test_cli_compare_segment_passes_the_time_limit(tmp_path, monkeypatch, capsys):
    import vitlab.dense.compare as dense_compare

    seen = {}

    def fake_compare_heads(heads, patches, **kwargs):
        seen.update(kwargs, heads=heads, patches=patches)
        return [{"head": h, "patch": p, "mean_iou": 0.5, "pixel_acc": 0.9, "boundary_acc": 0.4, "params": 1,
                 "seconds": 1.0} for p in patches for h in heads]

    monkeypatch.setattr(dense_compare, "compare_heads", fake_compare_heads)
    assert main(["compare", "--task", "segment", "--head", "linear,decoder", "--patches", "8", "--minutes", "2.5",
                 "--out", str(tmp_path), "--name", "h"]) == 0
    assert seen["time_limit_s"] == 150 and seen["patches"] == [8]
    assert (tmp_path / "h" / "heads.md").read_text().count("| 8 |") == 2
    assert main(["compare", "--task", "segment", "--patches", "8", "--out", str(tmp_path), "--name", "h"]) == 0
    assert seen["time_limit_s"] is None
