"""``vitlab explain`` on every checkpoint kind: classifiers get every map, pretrained MAE and DINO encoders
(real runs) the attention maps and the attention probe, every other kind one line that says why not."""

import json

import pytest

from vitlab.cli.main import main
from vitlab.models import PromptableConfig, PromptableModel, build_registered
from vitlab.models.dense import DenseConfig, DenseModel
from vitlab.runs import DataConfig, save_checkpoint
from vitlab.runs.kinds import checkpoint_kinds
from vitlab.tasks import run as run_task
from vitlab.tasks.ssl.pretrain import PretrainConfig

pytestmark = pytest.mark.filterwarnings("ignore:warmup_epochs")
TINY = {"embed_dim": 16, "depth": 2, "num_heads": 2}
DIGITS = DataConfig((8, 8), 1, (0.0,), (1.0,), [str(i) for i in range(10)], "unit", "digits")
RGB = DataConfig((32, 32), 3, (0.0,) * 3, (1.0,) * 3, ["a", "b"], "unit", "shapes")


def pretrained(method: str, folder):
    """A real ``vitlab pretrain`` run folder (one short epoch on 200 digits)."""
    run_task(
        "pretrain",
        PretrainConfig(
            method=method,
            model="vit-digits",
            model_overrides=TINY,
            rows=200,
            epochs=1,
            batch_size=64,
            out_dir=str(folder),
        ),
    )
    return folder


def saved(model, kind, data, folder):
    return save_checkpoint(
        model, folder / "model.safetensors", kind, data, name=getattr(model, "registered_name", None)
    )


# every checkpoint kind -> how to make one (in tmp folder) and whether explain reads it
MAKERS = {
    "classifier": (lambda f: saved(build_registered("vit-digits", **TINY), "classifier", DIGITS, f), True),
    "distilled-classifier": (
        lambda f: saved(build_registered("vit-digits", **TINY, distill_token=True), "distilled-classifier", DIGITS, f),
        True,
    ),
    "encoder": (lambda f: pretrained("mae", f), True),
    "segmenter": (
        lambda f: saved(
            DenseModel(DenseConfig(num_classes=2, img_size=32, patch_size=8, embed_dim=16, depth=1, num_heads=2)),
            "segmenter",
            RGB,
            f,
        ),
        False,
    ),
    "detector": (
        lambda f: saved(
            DenseModel(
                DenseConfig(
                    num_classes=2,
                    img_size=32,
                    patch_size=8,
                    embed_dim=16,
                    depth=1,
                    num_heads=2,
                    task="detect",
                    head="detr",
                )
            ),
            "detector",
            RGB,
            f,
        ),
        False,
    ),
    "promptable": (
        lambda f: saved(
            PromptableModel(
                PromptableConfig(
                    img_size=32,
                    patch_size=8,
                    embed_dim=32,
                    depth=1,
                    num_heads=2,
                    decoder_dim=16,
                    decoder_depth=1,
                    decoder_heads=2,
                )
            ),
            "promptable",
            RGB,
            f,
        ),
        False,
    ),
    "clip": (lambda f: saved(build_registered("clip-shapes"), "clip", RGB, f), False),
}


def test_every_checkpoint_kind_has_a_maker():
    assert set(MAKERS) == set(checkpoint_kinds())


@pytest.mark.parametrize("kind", checkpoint_kinds())
def test_explain_reads_or_refuses_every_checkpoint_kind_in_one_line(kind, tmp_path, capsys):
    make, readable = MAKERS[kind]
    source = make(tmp_path / "source")
    code = main(["explain", str(source), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    if not readable:
        assert code == 2 and len(captured.err.strip().splitlines()) == 1 and kind in captured.err
        assert "Traceback" not in captured.err
        return
    assert code == 0, captured.err
    report = json.loads((tmp_path / "out" / "explain.json").read_text())
    assert {"attention", "rollout"} <= set(report["maps"])
    if kind == "encoder":
        assert set(report["maps"]) == {"attention", "rollout"} and report["prediction"] is None
    else:
        assert "occlusion" in report["maps"] and report["prediction"] is not None


@pytest.mark.parametrize("method", ["mae", "dino"])
def test_pretrained_encoders_get_maps_and_the_attention_probe(method, tmp_path, capsys):
    run = pretrained(method, tmp_path / method)
    assert main(["explain", str(run), "--out", str(tmp_path / "maps")]) == 0
    assert main(["explain", str(run), "--probe", "attention", "--samples", "64", "--out", str(tmp_path / "p")]) == 0
    report = json.loads((tmp_path / "p" / "probes.json").read_text())
    assert report["kind"] == "encoder" and len(report["attention"]["mean_distance"]) == TINY["depth"]
    capsys.readouterr()
    assert main(["explain", str(run), "--probe", "permute", "--out", str(tmp_path / "q")]) == 2
    assert "no classifier head" in capsys.readouterr().err
    assert main(["explain", str(run), "--method", "occlusion", "--out", str(tmp_path / "r")]) == 2
    assert main(["explain", str(run), "--audit", "--out", str(tmp_path / "s")]) == 2
