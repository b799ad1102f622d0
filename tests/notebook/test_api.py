"""The notebook calls on tiny configs: each returns what its command makes (the same numbers the command prints),
and each result shows."""

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image

import vitlab
from vitlab.cli.main import main
from vitlab.notebook import display

TINY = {"rows": 64, "batch_size": 32, "epochs": 1, "depth": 1, "embed_dim": 16, "num_heads": 2}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("api") / "run"
    result = vitlab.run("classify", progress=False, out_dir=str(out), **TINY)
    return result, out


@pytest.mark.slow
def test_run_trains_as_train_does_and_shows(trained):
    result, out = trained
    assert isinstance(result, vitlab.tasks.RunResult) and result.checkpoint == out / "best" / "model.safetensors"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best_val_acc"] == pytest.approx(result.best_val_acc)
    config = json.loads((out / "config.json").read_text())
    assert config["recipe"] == "default" and config["epochs"] == 1 and config["model_overrides"]["depth"] == 1
    ET.fromstring(display.result_html(result))
    shown = ET.fromstring(vitlab.run_folder(out)._repr_html_())
    assert f"{summary['best_val_acc']:.4f}" in "".join(shown.itertext())


@pytest.mark.slow
def test_run_takes_a_config_or_its_fields_not_both(trained):
    with pytest.raises(vitlab.errors.ConfigError, match="not both"):
        vitlab.run("classify", vitlab.tasks.classify.TrainConfig(), epochs=1)


def test_run_resolves_a_config_file_and_fields_as_the_cli_does(tmp_path, monkeypatch):
    """vitlab.run and ``vitlab train --config FILE --set ...`` resolve the same config (the one resolution)."""
    import vitlab.tasks

    seen = []
    file = tmp_path / "cfg.yaml"
    file.write_text("epochs: 3\nrecipe: small-data\nlr: 0.01\n")
    monkeypatch.setattr(vitlab.tasks, "run", lambda spec, config, reporter=None: seen.append(config))
    vitlab.run("classify", str(file), progress=False, lr=0.02, **{"data.image_size": 16}, out_dir=str(tmp_path / "r"))
    expected = vitlab.tasks.resolve_config(
        "classify", file, {"lr": 0.02, "data.image_size": 16}, out_dir=str(tmp_path / "r")
    )
    assert seen == [expected]
    assert (seen[0].recipe, seen[0].epochs, seen[0].lr, seen[0].data.image_size) == ("small-data", 3, 0.02, (16, 16))


@pytest.mark.slow
def test_load_evaluate_and_predict_say_what_the_commands_print(trained, tmp_path, capsys):
    _, out = trained
    loaded = vitlab.load(out)
    assert loaded.kind == "classifier"
    ET.fromstring(display.loaded_html(loaded))
    text = vitlab.evaluate(out, split="val")
    assert main(["evaluate", str(out), "--split", "val", "--device", "cpu"]) == 0
    assert capsys.readouterr().out.strip() == text.strip()
    image = tmp_path / "digit.png"
    Image.fromarray((np.random.default_rng(0).random((8, 8)) * 255).astype(np.uint8)).save(image)
    text = vitlab.predict(out, [image], top_k=2)
    assert main(["predict", str(out), str(image), "--top-k", "2", "--device", "cpu"]) == 0
    assert capsys.readouterr().out.strip() == text.strip()


@pytest.mark.slow
def test_explain_writes_the_maps_and_shows_them(trained, tmp_path):
    _, out = trained
    explained = vitlab.explain(out, out=tmp_path / "explain", index=1, method="attention")
    assert explained.result["index"] == 1 and (tmp_path / "explain" / "maps.png").is_file()
    root = ET.fromstring(display.explained_html(explained))
    assert len(list(root.iter("img"))) == 2  # the maps and the heads


@pytest.mark.slow
def test_compare_runs_the_study_and_shows_its_report(tmp_path):
    result = vitlab.compare(out=tmp_path / "study", rows=[40], patches=[4], augment=["none"], epochs=1, progress=False)
    assert len(result.records) == 2 and (tmp_path / "study" / "report.md").is_file()
    root = ET.fromstring(display.compare_html(result))
    header = [c.text for c in next(root.iter("tr"))]
    assert header[:2] == ["Model", "Rows"]
    assert len(list(root.iter("img"))) >= 3  # accuracy against rows, learning curves, the gap
