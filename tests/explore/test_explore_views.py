"""What the explorer's pages are given, checked against oracles: study rows and curves that name the
full pool by its rows, the overview of a study that says whose numbers it shows, cost lines that
coincide, the image as the model reads it (inverted, padded) and its out-of-domain note, and the
checkpoints `vitlab explore` finds by itself."""

import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.analysis.cost import ATTENTION_COSTS, Workload, flops
from vitlab.data import load_dataset, normalize
from vitlab.data.preprocess import Preprocess
from vitlab.explore import decode_array
from vitlab.explore.images import LabeledImage
from vitlab.explore.pages.cost import COINCIDE, coinciding, cost_view
from vitlab.explore.pages.mechanics import position_view
from vitlab.explore.pages.tokens import OOD_MEAN, pad_to_aspect, prepared
from vitlab.explore.run_index import curves, find_runs, overview_row, rank_table, run_table


def record(label, kind, rows, train_rows, acc):
    """One run of a `vitlab compare` results.json (the fields the explorer reads)."""
    return {
        "label": label,
        "kind": kind,
        "model": f"{kind}-digits",
        "axes": {"seed": 0, "rows": rows, "patch": 2},
        "train_rows": train_rows,
        "params": 1000,
        "best_val_acc": acc,
        "test_acc": acc,
        "seconds": 1.0,
        "curves": {"val_acc": [acc / 2, acc], "val_loss": [2.0, 1.0]},
    }


@pytest.fixture()
def study(tmp_path):
    """A study of a ViT and a CNN on 48 rows and on the full pool (rows None: 1258 rows); the CNN wins."""
    folder = tmp_path / "study"
    folder.mkdir()
    results = {
        "config": {"dataset": "digits", "vit": "vit-digits", "cnn": "cnn-digits", "epochs": 2},
        "runs": [
            record("ViT patch 2", "vit", 48, 48, 0.3),
            record("CNN 8-16", "cnn", 48, 48, 0.4),
            record("ViT patch 2", "vit", None, 1258, 0.6),
            record("CNN 8-16", "cnn", None, 1258, 0.9),
        ],
        "conclusions": [],
        "seconds": 3.0,
    }
    (folder / "results.json").write_text(json.dumps(results))
    return find_runs([tmp_path])["study"]


def test_full_pool_runs_are_named_and_ranked_by_the_rows_they_used(study):
    ranked = rank_table(run_table(study), "rows")
    assert [r["values"]["rows"] for r in ranked["rows"]] == [1258, 1258, 48, 48]
    assert all(r["bar"] is not None for r in ranked["rows"])
    labels = [s["label"] for panel in curves(study) for s in panel["series"]]
    assert labels and not any("None" in label for label in labels)
    assert "ViT patch 2 (seed 0, rows 1258)" in labels


def test_a_study_overview_says_whose_accuracy_it_shows(study):
    row = overview_row(study)
    assert row["best_val_acc"] == 0.9 and row["model"] == "vit-digits vs cnn-digits (best: CNN 8-16)"


def test_coinciding_groups_series_within_the_tolerance():
    series = {"a": [1.0, 10.0], "b": [1.01, 10.2], "c": [2.0, 20.0], "d": [2.0, 19.9], "e": [5.0, 5.0]}
    assert coinciding(series, 0.02) == [["a", "b"], ["c", "d"]]
    assert coinciding(series, 0.001) == []


def test_cost_view_names_the_kinds_whose_lines_coincide():
    answer = cost_view(16, 768, 12, 12)
    works = [Workload(image=side, patch=16, dim=768, heads=12, depth=12) for side in answer["images"]]
    values = {kind: [flops(work, kind)["total"] for work in works] for kind in ATTENTION_COSTS}
    groups = answer["coincide"]["flops"]
    assert groups and answer["coincide_tolerance"] == COINCIDE
    grouped = [kind for group in groups for kind in group]
    assert len(grouped) == len(set(grouped)) and "full" not in grouped  # full attention's N^2 stands apart
    for group in groups:
        first = values[group[0]]
        for kind in group[1:]:
            assert all(abs(a - b) <= COINCIDE * max(a, b) for a, b in zip(values[kind], first))
    assert answer["coincide"]["entries"] == []  # linear's constant stands apart


def test_pad_to_aspect_centres_the_image_on_its_border_colour():
    image = torch.full((1, 1, 6, 2), 0.2)
    image[..., 2:4, :] = 1.0  # the border rows stay 0.2
    padded = pad_to_aspect(image, (8, 8))
    assert padded.shape == (1, 1, 6, 6)
    assert torch.equal(padded[..., :, 2:4], image)
    border = torch.cat([image[..., 0, :], image[..., -1, :], image[..., :, 0], image[..., :, -1]], -1).mean()
    assert torch.allclose(padded[..., :, :2], border.expand(1, 1, 6, 2))
    assert pad_to_aspect(torch.rand(1, 3, 5, 5), (8, 8)).shape == (1, 3, 5, 5)
    assert pad_to_aspect(torch.rand(1, 3, 4, 9), (2, 3)).shape == (1, 3, 6, 9)


def test_prepared_images_are_inverted_or_padded_and_named_apart():
    picture = LabeledImage("upload:x", torch.rand(1, 1, 4, 2), None)

    class Entry:
        image_size = (8, 8)

    assert prepared(picture, Entry()) is picture
    inverted = prepared(picture, Entry(), invert=True)
    assert torch.allclose(inverted.image, 1 - picture.image) and inverted.ref == "upload:x|invert"
    both = prepared(picture, Entry(), invert=True, keep_aspect=True)
    assert both.image.shape == (1, 1, 4, 4) and both.ref == "upload:x|invert|keep-aspect"


def upload(client, image: Image.Image) -> str:
    """Upload ``image`` as the page does (a same-origin POST); its reference."""
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    response = client.post(
        "/api/uploads",
        files={"file": ("image.png", buffer.getvalue(), "image/png")},
        headers={"origin": "http://127.0.0.1"},
    )
    assert response.status_code == 200, response.text
    return response.json()["ref"]


def get(client, path, **params):
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_what_the_model_sees_is_its_normalised_input(client):
    info = get(client, "/api/info")["models"][0]
    digits = load_dataset("digits").test.images
    seen = get(client, "/api/attention", model=0, ref="digits:3")["seen"]
    expected = normalize(digits[3:4], info["normalisation"]["mean"], info["normalisation"]["std"])[0]
    assert np.allclose(decode_array(seen["input"]), expected.numpy(), atol=1e-6)
    assert seen["mean"] == pytest.approx(float(expected.mean()), abs=1e-5)
    assert seen["out_of_domain"] is None and seen["steps"][-1].startswith("normalised")
    flipped = get(client, "/api/attention", model=0, ref="digits:3", invert="true")["seen"]
    inverse = normalize(1 - digits[3:4], info["normalisation"]["mean"], info["normalisation"]["std"])[0]
    assert np.allclose(decode_array(flipped["input"]), inverse.numpy(), atol=1e-6)
    assert abs(flipped["mean"]) > OOD_MEAN and "untick 'invert the image'" in flipped["out_of_domain"]  # it is on
    assert "try 'invert the image'" not in flipped["out_of_domain"]
    assert flipped["steps"][0].startswith("inverted")


def test_an_upload_is_shown_resized_stretched_or_padded(client):
    ref = upload(client, Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 24, 3), dtype=np.uint8)))
    stretched = get(client, "/api/attention", model=0, ref=ref)["seen"]
    assert any("colour to grey" in step for step in stretched["steps"])
    assert any(step.startswith("resized (bilinear) from 40×24 to 8×8 (stretched") for step in stretched["steps"])
    kept = get(client, "/api/attention", model=0, ref=ref, keep_aspect="true")
    assert any(step.startswith("padded to the model's aspect") for step in kept["seen"]["steps"])
    maps = get(client, "/api/maps", model=0, ref=ref, keep_aspect="true")
    assert maps["target"] == kept["prediction"]["class"]


def test_a_fitted_upload_feeds_the_model_the_pixels_predict_reads(client):
    image = Image.fromarray(np.random.default_rng(1).integers(0, 256, (16, 16), dtype=np.uint8))
    ref = upload(client, image)
    seen = get(client, "/api/attention", model=0, ref=ref)
    expected = Preprocess(image_size=(8, 8), channels=1).eval_image(image).float() / 255
    assert np.allclose(decode_array(seen["image"]), expected.numpy(), atol=1e-6)


def test_learned_positions_without_a_model_name_the_way_out():
    with pytest.raises(ValueError, match="choose a model"):
        position_view("learned")


def test_explore_without_checkpoints_loads_the_trained_runs_it_finds(runs_root, tmp_path, monkeypatch):
    from vitlab.cli.explore import explore_config
    from vitlab.cli.main import build_parser
    from vitlab.explore.launch import found_checkpoints

    kept = sorted((runs_root / "study" / "models").glob("*.safetensors"))  # every model the study trained
    assert len(kept) >= 2 and found_checkpoints([runs_root]) == [runs_root / "digits-vit", *kept]
    (tmp_path / "runs").symlink_to(runs_root, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    found = explore_config(build_parser().parse_args(["explore"])).checkpoints
    assert found == [Path("runs/digits-vit"), *(Path("runs/study/models") / k.name for k in kept)]
    given = explore_config(build_parser().parse_args(["explore", "--checkpoint", "mine.safetensors"]))
    assert given.checkpoints == ["mine.safetensors"]
