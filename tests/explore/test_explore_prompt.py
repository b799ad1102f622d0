"""The Mechanics page's 1-D position dot products and synthetic local attention against NumPy, and the
Segment page's endpoints against direct calls of `vitlab.tasks.promptable.segment`, with the promises SECURITY.md
makes for them: runs by name only, checkpoints inside the runs root and under the size cap, prompts
checked, one-line errors."""

import io
import json
import math
import shutil

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from PIL import Image

from vitlab.data import load_dataset
from vitlab.data.shapes import generate_shapes
from vitlab.explore import ExploreConfig, create_app, decode_array
from vitlab.explore.pages.segment import HELD_OUT, MAX_POINTS
from vitlab.tasks.promptable import promptable_checkpoint, segment


def get(client, path, **params):
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def refused(client, path, status, **params) -> str:
    response = client.get(path, params=params)
    assert response.status_code == status, response.text
    message = response.json()["error"]
    assert "\n" not in message and "Traceback" not in message
    return message


# -- 1-D positions ------------------------------------------------------------------------------------


def numpy_sinusoids(n: int, dim: int, scale: float) -> np.ndarray:
    """The transformer's sinusoids of positions 0..n-1, every frequency times ``scale``: (n, dim)."""
    omega = 10000.0 ** (-np.arange(dim // 2) / (dim // 2))
    angles = scale * np.arange(n)[:, None] * omega[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


@pytest.mark.parametrize(("n", "dim", "scale", "reference"), [(32, 64, 1.0, 0), (16, 16, 3.7, 5), (40, 128, 0.1, 39)])
def test_position_dots_equal_numpy(client, n, dim, scale, reference):
    answer = get(client, "/api/mechanics/position-dots", positions=n, dim=dim, scale=scale, reference=reference)
    table = numpy_sinusoids(n, dim, scale)
    expected = table @ table.T
    sincos = answer["kinds"]["sincos"]
    np.testing.assert_allclose(decode_array(sincos["dots"]), expected, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(decode_array(sincos["row"]), expected[reference], rtol=1e-5, atol=1e-4)
    offsets = np.subtract.outer(np.arange(n), np.arange(n))
    assert sincos["self"] == pytest.approx(dim / 2)  # sin^2 + cos^2 per frequency
    assert sincos["neighbours"] == pytest.approx(expected[np.abs(offsets) == 1].mean())
    assert sincos["all_pairs"] == pytest.approx(expected[offsets != 0].mean())
    # p_i . p_j = sum_k cos(scale (i - j) omega_k): it depends on i - j alone
    omega = 10000.0 ** (-np.arange(dim // 2) / (dim // 2))
    toeplitz = np.cos(scale * offsets[..., None] * omega).sum(-1)
    np.testing.assert_allclose(decode_array(sincos["dots"]), toeplitz, rtol=1e-5, atol=1e-4)
    noise = answer["kinds"]["random"]
    dots = decode_array(noise["dots"]).astype(np.float64)
    assert np.allclose(dots, dots.T, atol=1e-5) and np.all(np.linalg.eigvalsh(dots) > -1e-3)  # a Gram matrix
    assert noise["self"] == pytest.approx(dim / 2, rel=0.35) and abs(noise["all_pairs"]) < 0.25 * dim / 2
    everything = np.concatenate([decode_array(sincos["dots"]).ravel(), dots.ravel()])
    assert answer["magnitude"] == pytest.approx(np.abs(everything).max(), rel=1e-6)


def test_a_higher_frequency_scale_makes_neighbours_less_alike_and_leaves_random_positions_alone(client):
    answers = [get(client, "/api/mechanics/position-dots", scale=s)["kinds"] for s in (0.1, 1.0, 10.0)]
    neighbours = [a["sincos"]["neighbours"] for a in answers]
    assert neighbours[0] > neighbours[1] > neighbours[2]
    assert answers[0]["random"]["dots"] == answers[2]["random"]["dots"]


# -- synthetic local attention ----------------------------------------------------------------------


def textbook_attention(grid: int, query: int, sigma: float) -> np.ndarray:
    """The chapter's listing, with its 14, 7 * 14 + 7 and 2.0 as parameters."""
    coords = np.array([(i, j) for i in range(grid) for j in range(grid)])
    q = coords[query]
    dist2 = ((coords - q) ** 2).sum(axis=1)
    weights = np.exp(-dist2 / (2 * sigma**2))
    return weights / weights.sum()


@pytest.mark.parametrize(("grid", "sigma", "query"), [(14, 2.0, None), (14, 2.0, 0), (9, 0.7, 40), (20, 6.5, 57)])
def test_local_attention_is_the_textbook_listing(client, grid, sigma, query):
    params = {"grid": grid, "sigma": sigma} | ({} if query is None else {"query": query})
    answer = get(client, "/api/mechanics/local", **params)
    query = (grid // 2) * grid + grid // 2 if query is None else query
    expected = textbook_attention(grid, query, sigma)
    weights = decode_array(answer["weights"])
    assert weights.shape == (grid, grid) and answer["query"] == query
    np.testing.assert_allclose(weights.ravel(), expected, rtol=1e-5, atol=1e-9)
    assert answer["sum"] == pytest.approx(1.0) and answer["max"] == pytest.approx(expected.max())
    assert answer["at_query"] == pytest.approx(expected[query]) == pytest.approx(expected.max())
    entropy = -(expected * np.log(np.maximum(expected, 1e-30))).sum()
    assert answer["reach"] == pytest.approx(math.exp(entropy))
    coords = np.array([(i, j) for i in range(grid) for j in range(grid)])
    assert answer["rms_distance"] == pytest.approx(math.sqrt((expected * ((coords - coords[query]) ** 2).sum(1)).sum()))


def test_the_chapters_figure_is_the_default(client):
    answer = get(client, "/api/mechanics/local")
    assert (answer["grid"], answer["sigma"], answer["query"]) == (14, 2.0, 7 * 14 + 7)


@pytest.mark.parametrize(
    ("path", "params", "words"),
    [
        ("/api/mechanics/position-dots", {"positions": 1}, "positions must lie in [2, 256]"),
        ("/api/mechanics/position-dots", {"dim": 7}, "even width"),
        ("/api/mechanics/position-dots", {"scale": 0}, "frequency scale must lie in"),
        ("/api/mechanics/position-dots", {"positions": 8, "reference": 8}, "reference must lie in [0, 7]"),
        ("/api/mechanics/local", {"grid": 1}, "grid must lie in [2, 64]"),
        ("/api/mechanics/local", {"sigma": 0}, "sigma must lie in"),
        ("/api/mechanics/local", {"grid": 4, "query": 16}, "query must lie in [0, 15]"),
        ("/api/mechanics/local", {"sigma": "nan"}, "sigma must lie in"),
    ],
)
def test_mechanics_settings_out_of_range_name_the_range(client, path, params, words):
    assert words in refused(client, path, 400, **params)


# -- promptable runs ----------------------------------------------------------------------------------

PROMPT = "/api/prompt/runs/prompt"


@pytest.fixture(scope="module")
def promptable(runs_root):
    return promptable_checkpoint(runs_root / "prompt", device="cpu")


@pytest.fixture(scope="module")
def held_out(promptable):
    return generate_shapes(HELD_OUT, promptable.data.image_size[0], promptable.data.seed + 1)


def test_the_promptable_runs_are_listed_with_their_test_figures(client, runs_root):
    listing = get(client, "/api/prompt/runs")
    assert [r["name"] for r in listing["runs"]] == ["prompt"] and listing["runs"][0]["broken"] is None
    summary = json.loads((runs_root / "prompt" / "summary.json").read_text())
    assert listing["runs"][0]["test"] == summary["test"]


def test_a_promptable_run_shows_its_model_and_held_out_images(client, promptable, held_out):
    detail = get(client, PROMPT)
    cfg = promptable.model.config
    assert (detail["image_size"], detail["masks"]) == (cfg.img_size, cfg.num_masks)
    assert detail["patch_size"] == cfg.patch_size
    assert detail["params"] == sum(p.numel() for p in promptable.model.parameters())
    assert detail["checkpoint"] == "last/model.safetensors" and detail["dataset"] == "shapes"
    images = decode_array(detail["held_out"]["images"])
    assert np.array_equal(images, held_out.images.numpy())
    assert detail["held_out"]["objects"] == [len(b) for b in held_out.boxes]
    assert detail["held_out"]["seed"] == promptable.data.seed + 1  # the run's data never drew these


def iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 1.0


def object_pixel(instances: torch.Tensor, k: int) -> tuple[int, int]:
    """A pixel (x, y) of object k (instance k + 1)."""
    ys, xs = np.nonzero(instances.numpy() == k + 1)
    return int(xs[len(xs) // 2]), int(ys[len(ys) // 2])


@pytest.mark.parametrize("index", [0, 5])
def test_a_point_on_a_held_out_shape_gives_the_masks_segment_gives(client, promptable, held_out, index):
    x, y = object_pixel(held_out.instances[index], 0)
    answer = get(client, f"{PROMPT}/segment", ref=f"held-out:{index}", points=f"{x},{y}")
    masks, scores = segment(promptable.model, held_out.images[index], points=[(x, y)])
    assert np.array_equal(decode_array(answer["masks"]), masks.float().numpy())
    np.testing.assert_allclose(answer["iou"], scores.numpy(), rtol=1e-6)
    assert answer["iou"] == sorted(answer["iou"], reverse=True)  # best first
    assert answer["areas"] == masks.flatten(1).sum(-1).tolist()
    target = held_out.instances[index].numpy() == 1
    assert answer["truth"]["object"] == 1 and answer["truth"]["area"] == int(target.sum())
    assert answer["truth"]["class"] == held_out.classes[int(held_out.labels[index][0])]
    np.testing.assert_allclose(answer["truth"]["iou"], [iou(m, target) for m in masks.numpy()], rtol=1e-6)
    assert answer["prompt"] == {"points": [[x, y]], "labels": [1], "box": None}


def test_boxes_and_background_points_are_passed_on(client, promptable, held_out):
    box = held_out.boxes[2][0].tolist()
    wire = ",".join(f"{v:g}" for v in box)
    answer = get(client, f"{PROMPT}/segment", ref="held-out:2", box=wire, points="0,0", labels="0")
    masks, scores = segment(promptable.model, held_out.images[2], points=[(0, 0)], labels=[0], box=box)
    assert np.array_equal(decode_array(answer["masks"]), masks.float().numpy())
    np.testing.assert_allclose(answer["iou"], scores.numpy(), rtol=1e-6)
    assert answer["truth"]["object"] == 1  # no foreground point: the object filling the box
    background = get(client, f"{PROMPT}/segment", ref="held-out:2", points="0,0", labels="0")
    assert background["truth"] is None or held_out.instances[2][0, 0] > 0


def test_an_upload_or_a_grey_sample_is_segmented_without_a_truth(client, promptable):
    pixels = np.random.default_rng(3).integers(0, 256, (40, 24, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    ref = client.post("/api/uploads", files={"file": ("a.png", buffer.getvalue(), "image/png")}).json()["ref"]
    answer = get(client, f"{PROMPT}/segment", ref=ref, points="10,30")
    image = torch.from_numpy(pixels.astype(np.float32) / 255).permute(2, 0, 1)
    masks, _ = segment(promptable.model, image, points=[(10, 30)])
    assert (answer["height"], answer["width"]) == (40, 24) and answer["truth"] is None
    assert np.array_equal(decode_array(answer["masks"]), masks.float().numpy())
    digit = load_dataset("digits").test.images[3]
    grey = get(client, f"{PROMPT}/segment", ref="digits:3", points="4,4")
    masks, _ = segment(promptable.model, digit.expand(3, -1, -1), points=[(4, 4)])
    assert np.array_equal(decode_array(grey["masks"]), masks.float().numpy())


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"points": "32,3"}, "outside the 32x32 image"),
        ({"points": "-1,3"}, "outside the 32x32 image"),
        ({"points": "nan,3"}, "finite numbers"),
        ({"points": "1;2"}, "'x,y;x,y'"),
        ({"points": "a,b"}, "'x,y;x,y'"),
        ({"points": ";".join(["1,1"] * (MAX_POINTS + 1))}, f"at most {MAX_POINTS} points"),
        ({"points": "1," * 300 + "1"}, "characters"),
        ({"points": "1,1;2,2", "labels": "1"}, "one 1 (foreground) or 0 (background) per point"),
        ({"points": "1,1", "labels": "3"}, "one 1 (foreground) or 0 (background) per point"),
        ({"points": "1,1", "labels": "0.5"}, "one 1 (foreground) or 0 (background) per point"),
        ({"box": "5,5,5,9"}, "0 <= x0 < x1 <= 32"),
        ({"box": "0,0,33,9"}, "0 <= x0 < x1 <= 32"),
        ({"box": "1,2,3"}, "'x0,y0,x1,y1'"),
        ({}, "a prompt needs a point or a box"),
    ],
)
def test_bad_prompts_are_refused_in_one_line(client, params, words):
    assert words in refused(client, f"{PROMPT}/segment", 400, ref="held-out:0", **params)


def test_runs_and_images_are_reached_by_name_only(client):
    assert "no run 'nope'" in refused(client, "/api/prompt/runs/nope/segment", 404, ref="held-out:0", points="1,1")
    refused(client, "/api/prompt/runs/..%2F..%2Fetc/segment", 404, ref="held-out:0", points="1,1")
    assert "not a promptable one" in refused(client, "/api/prompt/runs/digits-vit", 400)
    assert "not a promptable one" in refused(client, "/api/prompt/runs/study", 400)
    assert "choose one of 0..23" in refused(client, f"{PROMPT}/segment", 404, ref="held-out:99", points="1,1")
    assert "unknown sample source" in refused(client, f"{PROMPT}/segment", 404, ref="etc:0", points="1,1")


@pytest.fixture()
def copied(runs_root, tmp_path):
    """A runs root holding a copy of the promptable run, and a client on it."""
    root = tmp_path / "runs"
    shutil.copytree(runs_root / "prompt", root / "prompt")
    app = create_app(ExploreConfig(runs=[root]))
    return root, TestClient(app, base_url="http://127.0.0.1", headers={"origin": "http://127.0.0.1"})


def test_a_checkpoint_linking_outside_the_runs_root_is_not_read(copied, tmp_path):
    root, client = copied
    weights = root / "prompt" / "last" / "model.safetensors"
    outside = tmp_path / "elsewhere.safetensors"
    weights.rename(outside)
    weights.symlink_to(outside)
    assert "links outside the runs root" in refused(client, PROMPT, 403)


def test_a_checkpoint_over_the_size_cap_is_not_read(copied, monkeypatch):
    _, client = copied
    monkeypatch.setattr("vitlab.explore.run_files.MAX_RUN_FILE", 1000)
    assert "over the 1,000 the explorer reads" in refused(client, PROMPT, 422)


def test_a_broken_or_missing_checkpoint_answers_its_reason(copied):
    root, client = copied
    weights = root / "prompt" / "last" / "model.safetensors"
    weights.write_bytes(b"not a checkpoint")
    message = refused(client, PROMPT, 422)
    assert message.startswith("run 'prompt': ")
    weights.unlink()
    assert "has no checkpoint" in refused(client, PROMPT, 409)


def test_an_unreadable_run_json_is_listed_with_its_reason(copied):
    root, client = copied
    (root / "prompt" / "run.json").write_text("{not json")
    (run,) = get(client, "/api/prompt/runs")["runs"]
    assert run["name"] == "prompt" and "run.json of run prompt is not JSON" in run["broken"]
    assert "is not JSON" in refused(client, PROMPT, 409)


def test_a_promptable_run_reads_as_one_on_the_runs_page(client):
    row = next(r["values"] for r in get(client, "/api/runs")["table"]["rows"] if r["values"]["run"] == "prompt")
    assert row["model"] == "promptable" and row["dataset"] == "shapes"
    detail = get(client, "/api/runs/prompt")
    assert detail["facts"]["task"] == "promptable"
    assert [s["label"] for panel in detail["curves"] for s in panel["series"]] == ["train loss"]
