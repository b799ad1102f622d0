"""Each notebook display: well-formed HTML (parsed as XML), PNGs that decode, and the numbers shown equal the
object's own."""

import base64
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image
from torch import nn

import vitlab
from vitlab.analysis.params import parameter_table
from vitlab.explain.request import Explained
from vitlab.models.cnn import count_params
from vitlab.notebook import display
from vitlab.notebook.markup import markdown_html
from vitlab.runs import DataConfig, Loaded


def parse(html: str) -> ET.Element:
    """The display's HTML as an XML tree (a display that is not well-formed fails here)."""
    return ET.fromstring(html)


def texts(root: ET.Element) -> str:
    return "".join(root.itertext())


def images(root: ET.Element) -> list[Image.Image]:
    """Every embedded PNG, decoded."""
    found = []
    for img in root.iter("img"):
        kind, data = img.attrib["src"].split(",", 1)
        assert kind == "data:image/png;base64"
        found.append(Image.open(io.BytesIO(base64.b64decode(data))))
        found[-1].load()
    return found


def cells(root: ET.Element) -> dict[str, str]:
    """A two-column table's rows as ``{first cell: second cell}``."""
    return {
        "".join(tr[0].itertext()): "".join(tr[1].itertext())
        for tr in root.iter("tr")
        if len(tr) == 2 and tr[0].tag == "td"
    }


def test_a_model_shows_its_parameters_by_component_and_its_shapes():
    model = vitlab.create_model("vit-seed")
    root = parse(display.model_html(model))
    pres = [texts(p) for p in root.iter("pre")]
    table, shapes = pres
    lines = table.splitlines()
    assert lines[0].split() == ["component", "size", "params"]  # all trainable: no trainable column
    for row, line in zip(parameter_table(model), lines[1:]):
        assert line.strip().startswith(row.component) and line.endswith(f"{row.params:,}")
    assert lines[-1].split() == ["total", f"{count_params(model, trainable_only=False):,}"]
    c = model.config
    assert f"P={c.patch_size}, D={c.embed_dim}, H={c.num_heads}" in shapes
    assert f"N={(c.img_size[0] // c.patch_size) * (c.img_size[1] // c.patch_size)} patches" in shapes


def test_a_model_with_frozen_parts_shows_what_trains():
    model = vitlab.create_model("vit-seed")
    model.patch_embed.requires_grad_(False)
    lines = display.params_text(model).splitlines()
    assert lines[0].split()[-1] == "trainable"
    frozen = next(line for line in lines if line.lstrip().startswith("patch projection"))
    assert frozen.split()[-2:] == ["3,200", "0"]
    assert lines[-1].split() == ["total", f"{count_params(model, trainable_only=False):,}", f"{count_params(model):,}"]


def test_a_cnn_shows_its_table_without_shapes_and_a_foreign_module_is_left_alone():
    model = vitlab.create_model("cnn-seed")
    root = parse(display.model_html(model))
    assert len(list(root.iter("pre"))) == 1
    assert f"{count_params(model, trainable_only=False):,}" in texts(root)
    assert display.model_html(nn.Linear(2, 3)) is None


def test_a_loaded_checkpoint_shows_its_source_data_config_and_classes():
    model = vitlab.create_model("vit-seed")
    classes = [f"c{i}" for i in range(25)]
    data = DataConfig(
        image_size=(28, 28), in_chans=1, mean=(0.1307,), std=(0.3081,), classes=classes, dataset="mnist", crop_pct=0.875
    )
    loaded = Loaded(model, data, "classifier", "vit-seed", {"source": "timm"}, Path("runs/x/best/model.safetensors"))
    loaded.guessed["num_heads"] = "4 (from the widths)"
    root = parse(display.loaded_html(loaded))
    rows = cells(root)
    assert rows["source"] == "runs/x/best/model.safetensors (timm)"
    assert rows["input"] == "1 x 28 x 28" and rows["mean"] == "0.1307" and rows["std"] == "0.3081"
    assert rows["resize"] == "bilinear, crop squash at 0.875"
    assert rows["classes"].startswith("25: c0, c1,") and rows["classes"].endswith("(5 more)")
    assert rows["guessed num_heads"] == "4 (from the widths)" and "file" not in rows
    loaded.metadata["source_id"] = "timm/vit_tiny_patch16_224.augreg_in21k"  # read from the hub cache
    rows = cells(parse(display.loaded_html(loaded)))
    assert rows["source"] == "timm/vit_tiny_patch16_224.augreg_in21k (timm)"
    assert rows["file"] == "runs/x/best/model.safetensors"
    assert f"{count_params(model, trainable_only=False):,}" in texts(root)


@pytest.fixture
def run_folder(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model": "vit-digits", "epochs": 3}))
    history = [
        {"epoch": e, "train_loss": 2.0 / e, "train_acc": 0.3 * e, "val_loss": 2.2 / e, "val_acc": 0.25 * e}
        for e in (1, 2, 3)
    ]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in history))
    summary = {"val": {"acc": 0.75, "loss": 0.7333}, "test": {"acc": 0.7123}, "epochs": 3, "best_epoch": 3}
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_a_run_folder_shows_its_summary_and_its_curves(run_folder):
    run = vitlab.run_folder(run_folder)
    root = parse(run._repr_html_())
    rows = cells(root)
    assert rows["val acc"] == "0.7500" and rows["test acc"] == "0.7123" and rows["best_epoch"] == "3"
    assert "3 epochs" in texts(root)
    (curves,) = images(root)
    assert curves.size[0] > curves.size[1] > 100  # two panels side by side
    png = Image.open(io.BytesIO(run._repr_png_()))
    assert png.format == "PNG"


def test_an_unfinished_run_says_so_and_a_folder_that_is_no_run_is_refused(run_folder, tmp_path):
    (run_folder / "summary.json").unlink()
    assert "no summary yet" in texts(parse(vitlab.run_folder(run_folder)._repr_html_()))
    with pytest.raises(vitlab.errors.RunFolderError, match="not a run folder"):
        vitlab.run_folder(tmp_path)


def test_a_training_result_shows_its_task_summary():
    history = [{"epoch": 1, "train_loss": 1.0, "train_acc": 0.5, "val_acc": 0.6}]
    result = vitlab.tasks.RunResult(
        "classify", vitlab.tasks.classify.TrainConfig(), nn.Linear(1, 1), history, {"acc": 0.6}, None, 1, 1.5, 2
    )
    root = parse(display.result_html(result))
    rows = cells(root)
    assert rows["best_val_acc"] == "0.6000" and rows["train_acc"] == "0.5000"  # classify's summary.json
    assert rows["params"] == "2" and rows["seconds"] == "1.5000"
    assert len(images(root)) == 1
    assert Image.open(io.BytesIO(display.result_png(result))).format == "PNG"


def write_png(path: Path, size=(60, 40)) -> Path:
    Image.new("RGB", size, (200, 30, 30)).save(path)
    return path


def test_a_study_shows_its_report_tables_verdicts_and_figures(tmp_path):
    write_png(tmp_path / "gap.png")
    report = tmp_path / "report.md"
    report.write_text(
        "# compare: ViT against a CNN\n\nA study of **two** models on `digits`.\n\n"
        "| Model | Best val accuracy | Verdict |\n| --- | --- | --- |\n| vit-digits | 0.9100 ± 0.0100 | reproduced |\n"
        "| cnn | 0.9300 | inconclusive |\n\n- the CNN leads at 300 rows\n- another line\n\n"
        "![Train − validation gap](gap.png)\n"
        "\n![missing](absent.png)\n"
    )
    root = parse(display.compare_html(SimpleNamespace(files={"report": report}, records={})))
    rows = [[texts(td) for td in tr] for tr in root.iter("tr")]
    assert rows == [
        ["Model", "Best val accuracy", "Verdict"],
        ["vit-digits", "0.9100 ± 0.0100", "reproduced"],
        ["cnn", "0.9300", "inconclusive"],
    ]
    assert [texts(li) for li in root.iter("li")] == ["the CNN leads at 300 rows", "another line"]
    assert [im.size for im in images(root)] == [(60, 40)]
    assert "missing (absent.png)" in texts(root)
    assert root.find(".//strong").text == "two" and root.find(".//code").text == "digits"


def test_markdown_text_is_escaped():
    body = markdown_html("a <b> & c\n\n| x<y | z |\n| - | - |\n| 1 & 2 | <i> |")
    root = parse(f"<div>{body}</div>")
    assert texts(root.find("p")) == "a <b> & c"
    assert [[texts(td) for td in tr] for tr in root.iter("tr")] == [["x<y", "z"], ["1 & 2", "<i>"]]


def test_an_explanation_shows_its_summary_and_its_maps(tmp_path):
    maps = write_png(tmp_path / "maps.png", (90, 30))
    heads = write_png(tmp_path / "heads.png", (50, 50))
    report = {
        "maps": {"attention": {"top_patch": [1, 2], "max": 0.0052}},
        "files": [str(maps), str(heads), str(tmp_path / "explain.json")],
    }
    text = "vit on digits val #0: 3 → 3 (confidence 0.9000)\n"
    text += "  attention   top patch (row, col) (1, 2)  max 0.0052\nwrote ...\n"
    explained = Explained(report, text)
    root = parse(display.explained_html(explained))
    assert "attention   top patch (row, col) (1, 2)  max 0.0052" in texts(root.find(".//pre"))
    assert [im.size for im in images(root)] == [(90, 30), (50, 50)]
    assert Image.open(io.BytesIO(display.explained_png(explained))).size == (90, 30)


def test_ipython_shows_vitlab_objects_through_the_registered_displays():
    interactive = pytest.importorskip("IPython.core.interactiveshell")
    shell = interactive.InteractiveShell.instance()
    try:
        assert display.register(shell)
        model = vitlab.create_model("vit-seed")
        data, _ = shell.display_formatter.format(model)
        assert data["text/html"] == display.model_html(model)
        data, _ = shell.display_formatter.format(nn.Linear(2, 2))
        assert "text/html" not in data  # not vitlab's: its usual repr
        explained = Explained({"files": []}, "no figures\n")
        data, _ = shell.display_formatter.format(explained)
        assert "no figures" in data["text/html"]
    finally:
        interactive.InteractiveShell.clear_instance()


def test_vitlab_explain_is_the_package_and_the_call():
    import vitlab.explain.maps

    assert vitlab.explain.maps is vitlab.explain.maps  # the package's modules, as before
    assert callable(vitlab.explain) and vitlab.explain.attention_weights is not None
    with pytest.raises(vitlab.errors.ConfigError, match="--probe"):
        vitlab.explain("no-such-run", probes=["nonsense"])  # the request is checked before anything is loaded


def test_the_notebook_calls_are_at_the_top_level():
    from vitlab.notebook import api

    for name in api.__all__:
        assert getattr(vitlab, name) is getattr(api, name) or name == "explain"


@pytest.mark.slow
def test_a_notebook_shows_a_model_as_html_after_import_vitlab():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell('import vitlab\nvitlab.create_model("vit-seed")')]
    )
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    (output,) = notebook.cells[0].outputs
    shown = parse(output["data"]["text/html"])
    assert "patch projection" in texts(shown) and "71,946" in texts(shown)  # the textbook's count, by component
