"""The limits of attention: the model's confident mistakes, maps of a model with random weights, deletion
curves; a CNN explained by its gradient and occlusion maps; the sample sources found where vitlab looks."""

from pathlib import Path

import numpy as np
import pytest
import torch

from vitlab.analysis.cost import TEXTBOOK_PAIRS, cost_table, interactions
from vitlab.analysis.qk import qk_variance
from vitlab.data import load_dataset, normalize
from vitlab.explain.faithfulness import curve_area, deletion_insertion, ranking
from vitlab.explain.maps import gradient_map, occlusion_map
from vitlab.explore import decode_array
from vitlab.explore.images import ImageBook, decode_upload
from vitlab.runs import load_checkpoint

FASHION = Path("/usr/share/datasets/fashion-mnist")
MAP_PANELS = ("maps", "randomised", "deletion")  # the Limits page's panels of maps and curves


def get(client, path, **params):
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture(scope="module")
def trained(runs_root):
    return load_checkpoint(runs_root / "digits-vit")


def test_verdicts_list_the_most_confident_mistakes_first(client, trained):
    answer = get(client, "/api/limits/verdicts", model=0, source="digits")
    data = load_dataset("digits").test
    with torch.no_grad():
        probs = trained.model(normalize(data.images, trained.data.mean, trained.data.std)).softmax(-1)
    confidence, predicted = probs.max(-1)
    wrong = (predicted != data.labels).nonzero()[:, 0]
    assert answer["images"] == len(data) and answer["wrong_count"] == len(wrong)
    assert answer["accuracy"] == pytest.approx(1 - len(wrong) / len(data))
    shown = answer["mistakes"]
    assert len(shown) == min(12, len(wrong))
    assert [m["confidence"] for m in shown] == sorted((m["confidence"] for m in shown), reverse=True)
    for mistake in shown:
        index = int(mistake["ref"].split(":")[1])
        assert mistake["predicted"] != mistake["label"] == data.classes[int(data.labels[index])]
        assert mistake["confidence"] == pytest.approx(float(confidence[index]), abs=1e-6)
    assert max(m["confidence"] for m in shown) == pytest.approx(float(confidence[wrong].max()), abs=1e-6)
    assert all(r["predicted"] == r["label"] for r in answer["right"])


def test_verdicts_need_the_models_own_classes(client):
    response = client.get("/api/limits/verdicts", params={"model": 0, "source": "synthetic"})
    assert response.status_code == 400 and "classes" in response.json()["error"]


def test_a_randomised_model_gives_other_maps_and_their_rank_correlation(client, trained):
    answer = get(client, "/api/limits/randomised", model=0, ref="digits:7", query="mean")
    assert set(answer["trained"]) == set(answer["randomised"]) == {"attention", "rollout", "gradient", "occlusion"}
    inputs = normalize(load_dataset("digits").test.images[7:8], trained.data.mean, trained.data.std)
    target = trained.model(inputs).argmax(-1)
    np.testing.assert_allclose(
        decode_array(answer["trained"]["gradient"]["values"]),
        gradient_map(trained.model, inputs, target, 2)[0].numpy(),
        rtol=1e-5,
        atol=1e-6,
    )
    for method, rho in answer["spearman"].items():
        assert rho is None or -1 <= rho <= 1, method
    differs = [
        not np.allclose(decode_array(answer["trained"][m]["values"]), decode_array(answer["randomised"][m]["values"]))
        for m in answer["trained"]
    ]
    assert all(differs)
    assert answer["truth"]["label"] == load_dataset("digits").test.classes[int(load_dataset("digits").test.labels[7])]


def test_deletion_curves_are_the_audits(client, trained):
    answer = get(client, "/api/limits/deletion", model=0, ref="digits:7", query="mean")
    assert set(answer["curves"]) == {"attention", "rollout", "gradient", "occlusion", "random"}
    inputs = normalize(load_dataset("digits").test.images[7:8], trained.data.mean, trained.data.std)
    target = trained.model(inputs).argmax(-1)
    occlusion = occlusion_map(trained.model, inputs, target, 2)
    expected = deletion_insertion(trained.model, inputs, ranking(occlusion), target, 2)[0][0]
    np.testing.assert_allclose(answer["curves"]["occlusion"], expected.numpy(), atol=1e-5)
    assert answer["area"]["occlusion"] == pytest.approx(float(curve_area(expected)), abs=1e-5)
    with torch.no_grad():
        start = float(trained.model(inputs).softmax(-1)[0, target])
    assert all(curve[0] == pytest.approx(start, abs=1e-5) for curve in answer["curves"].values())
    assert len(answer["removed"]) == answer["patches"] + 1 == 17


def test_each_panel_in_pieces_is_the_whole_panel(client):
    """The page asks for a panel one map or one curve at a time: each piece holds just that method, with the numbers
    of the whole answer (the trained maps themselves, cached once per image)."""
    whole = {kind: get(client, f"/api/limits/{kind}", model=0, ref="digits:9") for kind in MAP_PANELS}
    attention_page = get(client, "/api/maps", model=0, ref="digits:9")["maps"]
    for method in ("attention", "rollout", "gradient", "occlusion"):
        assert get(client, "/api/limits/maps", model=0, ref="digits:9", method=method)["maps"] == {
            method: whole["maps"]["maps"][method]
        }
        if method != "attention":  # the Attention page shows attention itself, not as a map
            piece = get(client, "/api/maps", model=0, ref="digits:9", method=method)["maps"]
            assert piece == {method: attention_page[method]}
        random = get(client, "/api/limits/randomised", model=0, ref="digits:9", method=method)
        for part in ("trained", "randomised"):
            assert random[part].keys() == {method}
            np.testing.assert_allclose(
                decode_array(random[part][method]["values"]),
                decode_array(whole["randomised"][part][method]["values"]),
                atol=1e-6,
            )
        assert random["spearman"][method] == pytest.approx(whole["randomised"]["spearman"][method], abs=1e-6)
    for method in ("attention", "rollout", "gradient", "occlusion", "random"):
        curve = get(client, "/api/limits/deletion", model=0, ref="digits:9", method=method)
        assert curve["curves"].keys() == {method} and curve["removed"] == whole["deletion"]["removed"]
        np.testing.assert_allclose(curve["curves"][method], whole["deletion"]["curves"][method], atol=1e-6)
        assert curve["area"][method] == pytest.approx(whole["deletion"]["area"][method], abs=1e-6)
    assert curve["random_orders"] == whole["deletion"]["random_orders"] == 8
    refused = client.get("/api/limits/deletion", params={"model": 0, "ref": "digits:9", "method": "saliency"})
    assert refused.status_code == 400
    assert refused.json()["error"] == (
        "method must be one of attention, rollout, gradient, occlusion, random for this model, got 'saliency'"
    )


def test_a_cnn_is_explained_by_its_gradient_and_occlusion_maps(cnn_client, cnn_root):
    info = get(cnn_client, "/api/info")
    (model,) = info["models"]
    assert model["model"] == "cnn-digits" and not model["attention"] and model["forward_pass"]
    assert model["map_patch"] == 1 and model["map_grid"] == [8, 8]
    answer = get(cnn_client, "/api/attention", model=0, ref="digits:3")
    assert answer["attention"] is False and "gradient and occlusion" in answer["reason"]
    assert answer["truth"]["correct"] in (True, False)
    maps = get(cnn_client, "/api/maps", model=0, ref="digits:3")
    assert set(maps["maps"]) == {"gradient", "occlusion"} and maps["grid"] == [8, 8]
    loaded = load_checkpoint(cnn_root / "cnn")
    inputs = normalize(load_dataset("digits").test.images[3:4], loaded.data.mean, loaded.data.std)
    np.testing.assert_allclose(
        decode_array(maps["maps"]["occlusion"]["values"]),
        occlusion_map(loaded.model, inputs, None, 1)[0].numpy(),
        atol=1e-6,
    )
    assert get(cnn_client, "/api/limits/deletion", model=0, ref="digits:3")["curves"].keys() == {
        "gradient",
        "occlusion",
        "random",
    }
    refused = cnn_client.get("/api/maps", params={"model": 0, "ref": "digits:3", "method": "rollout"})
    assert refused.status_code == 400 and "one of gradient, occlusion for this model" in refused.json()["error"]
    refused = cnn_client.get("/api/forward", params={"model": 0, "ref": "digits:3"})
    assert refused.status_code == 400 and "not a ViT" in refused.json()["error"]


def test_the_true_label_is_judged_only_on_the_models_own_classes(client):
    right_or_wrong = get(client, "/api/attention", model=0, ref="digits:7")["truth"]
    assert right_or_wrong["correct"] in (True, False) and right_or_wrong["note"] is None
    foreign = get(client, "/api/attention", model=0, ref="synthetic:0")["truth"]
    assert foreign["correct"] is None and "not one of the classes" in foreign["note"]


def test_tokens_as_the_model_reads_them(client):
    buffer = __import__("io").BytesIO()
    __import__("PIL.Image").Image.fromarray(np.full((112, 112, 3), 255, np.uint8)).save(buffer, "PNG")
    upload = client.post("/api/uploads", files={"file": ("pad.png", buffer.getvalue(), "image/png")}).json()
    assert upload["channels"] == 1  # a grey picture saved as RGB is read as grey
    answer = get(client, "/api/tokens", ref=upload["ref"], model=0)
    assert (answer["tokens"], answer["token_width"]) == (16, 4)
    assert answer["read_by"]["size"] == [8, 8] and answer["read_by"]["original"] == [112, 112, 1]
    assert get(client, "/api/tokens", ref=upload["ref"], patch=28)["token_width"] == 784


def test_colour_uploads_stay_colour():
    from PIL import Image

    buffer = __import__("io").BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(buffer, "PNG")
    assert decode_upload(buffer.getvalue()).shape == (1, 3, 8, 8)


@pytest.mark.skipif(not FASHION.is_dir(), reason="apt-get install dataset-fashion-mnist")
def test_sources_are_available_where_vitlab_finds_their_files(tmp_path):
    sources = {s["name"]: s for s in ImageBook().sources()}
    assert sources["fashion-mnist"]["available"] and sources["fashion-mnist"]["folder"] == str(FASHION)
    assert not sources["mnist"]["available"] and not sources["cifar10"]["available"]
    given = {s["name"]: s for s in ImageBook(FASHION.parent).sources()}
    assert given["fashion-mnist"]["available"] and not given["mnist"]["available"]
    assert not given["cifar10"]["available"] and "cifar10" in given["cifar10"]["reason"]
    assert ImageBook(tmp_path).split("fashion-mnist").images.shape[1:] == (1, 28, 28)  # found by default too


def test_the_texts_tables(client):
    answer = get(client, "/api/cost/textbook")
    assert [(r["image"], r["patch"], r["tokens"], r["entries"]) for r in answer["cost"]] == [
        (r.image, r.patch, r.tokens, r.entries) for r in cost_table(TEXTBOOK_PAIRS)
    ]
    assert [(p["conv3x3"], p["attention"]) for p in answer["pairs"]] == [
        (interactions(i, p).conv3x3, interactions(i, p).attention) for i, p in TEXTBOOK_PAIRS
    ]
    scale = get(client, "/api/mechanics/qk-scale", keys=64)
    index = scale["dims"].index(64)
    assert (scale["variance_raw"][index], scale["variance_scaled"][index]) == pytest.approx(qk_variance(64, 4000))
    assert scale["peak_raw"][-1] > 0.5 > scale["peak_scaled"][-1]
