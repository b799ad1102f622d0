"""Probes: shuffled patches, shifts, occlusion, other sides, and attention by depth, each against what it
must be by construction; and ``vitlab explain --probe`` on a trained classifier."""

import json
import math

import pytest
import torch

from vitlab.cli.main import main
from vitlab.data import normalize
from vitlab.errors import ConfigError
from vitlab.explain.attention_depth import depth_trend, mean_attention_distance, receptive_fields, token_centres
from vitlab.explain.input_probes import (
    permutation_probe,
    permute_patches,
    resolution_probe,
    run_probes,
    shift_images,
    without_positions,
)
from vitlab.models import build_registered
from vitlab.ops.patches import patchify

TINY = {"embed_dim": 16, "depth": 2, "num_heads": 2}


def held_out(run, n=300):
    splits = run.splits
    return normalize(splits.val.images[:n], splits.mean, splits.std), splits.val.labels[:n]


def test_permute_patches_moves_whole_patches():
    images = torch.arange(2 * 16, dtype=torch.float32).reshape(2, 1, 4, 4)
    order = torch.tensor([3, 2, 1, 0])
    moved = permute_patches(images, 2, order)
    torch.testing.assert_close(patchify(moved, 2), patchify(images, 2)[:, order])
    with pytest.raises(ConfigError, match="does not divide"):
        permute_patches(torch.rand(1, 1, 5, 5), 2, order)


def test_without_positions_a_vit_cannot_tell_shuffled_patches_and_with_them_it_can(digits_run):
    images, labels = held_out(digits_run)
    result = permutation_probe(digits_run.model, images, labels, patch=2, permutations=3)
    trained, stripped = result["rows"]
    assert trained["positions"] == "learned" and stripped["positions"] == "none"
    # the trained model's predictions move when its patches move...
    assert trained["agreement"] < 0.95 and trained["accuracy"] < trained["clean_accuracy"]
    # ...the same weights without positions are permutation-invariant: agreement 1 to float precision
    assert stripped["agreement"] == 1.0 and stripped["accuracy"] == stripped["clean_accuracy"]
    assert stripped["max_probability_change"] < 1e-5
    assert digits_run.model.config.pos_embed == "learned"  # the model itself keeps its positions


@pytest.mark.parametrize("positions", [{"pos_embed": "none"}, {"pos_embed": "rope"}, {"rel_pos": "per_block"}])
def test_removing_every_kind_of_position_leaves_an_invariant_model(positions):
    torch.manual_seed(0)
    model = build_registered("vit-digits", **TINY, **positions).eval()
    images, labels = torch.randn(32, 1, 8, 8), torch.randint(0, 10, (32,))
    rows = permutation_probe(model, images, labels, patch=2)["rows"]
    assert rows[-1]["positions"] == "none" and rows[-1]["max_probability_change"] < 1e-5
    stripped = without_positions(model) if len(rows) > 1 else model
    assert not any(p.requires_grad and "pos" in n for n, p in stripped.named_parameters())


def test_a_convnet_is_the_control_its_predictions_move(digits_run):
    torch.manual_seed(0)
    cnn = build_registered("cnn-digits").eval()
    images = torch.randn(64, 1, 8, 8)
    (row,) = permutation_probe(cnn, images, torch.zeros(64, dtype=torch.long), patch=2)["rows"]
    assert row["positions"] == "none (a convnet)" and row["max_probability_change"] > 1e-3


def test_shift_moves_pixels_right_and_down_and_fills_with_zero():
    images = torch.arange(1, 17, dtype=torch.float32).reshape(1, 1, 4, 4)
    moved = shift_images(images, 1)
    torch.testing.assert_close(moved[0, 0, 1:, 1:], images[0, 0, :3, :3])
    assert float(moved[0, 0, 0].abs().sum()) == float(moved[0, 0, :, 0].abs().sum()) == 0
    assert shift_images(images, 0) is images


def test_resolution_resamples_learned_positions_and_explains_what_cannot_move():
    torch.manual_seed(0)
    images, labels = torch.randn(16, 1, 8, 8), torch.randint(0, 10, (16,))
    rows = resolution_probe(build_registered("vit-digits", **TINY).eval(), images, labels, patch=2, scales=(1.0, 2.0))
    assert [r["size"] for r in rows] == [[8, 8], [16, 16]]
    assert rows[0]["agreement"] == 1.0 and "accuracy" in rows[1]
    biased = build_registered("vit-digits", **TINY, pos_embed="none", rel_pos="per_block").eval()
    (row,) = resolution_probe(biased, images, labels, patch=2, scales=(2.0,))
    assert "bias table" in row["reason"]


def test_attention_distance_by_hand():
    # 2x2 grid of 2-pixel patches: centres (0.5, 0.5), (0.5, 2.5), (2.5, 0.5), (2.5, 2.5)
    model = build_registered("vit-digits", **TINY, img_size=4)
    centres = token_centres(model, (4, 4))
    torch.testing.assert_close(
        centres, torch.tensor([[0.5, 0.5], [0.5, 2.5], [2.5, 0.5], [2.5, 2.5]], dtype=torch.float64)
    )
    distance = torch.cdist(centres, centres)
    own = torch.eye(4, dtype=torch.float64)
    assert float(mean_attention_distance(own, distance, 0)) == 0  # every query on itself
    uniform = torch.full((4, 4), 0.25, dtype=torch.float64)
    assert float(mean_attention_distance(uniform, distance, 0)) == pytest.approx((0 + 2 + 2 + 2 * math.sqrt(2)) / 4)
    # a class token's column is left out and the patch weights renormalised
    with_cls = torch.zeros(5, 5, dtype=torch.float64)
    with_cls[1:, 0], with_cls[1:, 1] = 0.5, 0.5  # half on the class token, half on patch 0
    assert float(mean_attention_distance(with_cls, distance, 1)) == pytest.approx((0 + 2 + 2 + 2 * math.sqrt(2)) / 4)
    # an overlapping tokenizer's windows sit every stride pixels
    strided = build_registered("vit-seed", patch_stride=4)
    assert token_centres(strided, (28, 28))[:2].tolist() == [[3.0, 3.0], [3.0, 7.0]]


def test_attention_diagnostics_of_a_trained_vit(digits_run):
    images, labels = held_out(digits_run, 128)
    result = run_probes(digits_run.model, images, labels, ["attention"])["attention"]
    depth, heads = digits_run.model.config.depth, digits_run.model.config.num_heads
    for name in ("mean_distance", "entropy", "neighbourhood", "max", "max_minus_min"):
        assert len(result[name]) == depth and all(len(layer) == heads for layer in result[name])
    assert result["prefix_fraction"] is None  # mean-pooled, no class token
    tokens = result["tokens"]["patches"]
    for layer in range(depth):
        for head in range(heads):
            assert 0 <= result["mean_distance"][layer][head] <= 8 * math.sqrt(2)
            assert 1 <= result["neighbourhood"][layer][head] <= tokens + 1e-6
            assert 1 / tokens - 1e-9 <= result["max"][layer][head] <= 1
            assert result["max_minus_min"][layer][head] <= result["max"][layer][head]
    assert result["entropy"][0][0] <= math.log(tokens) + 1e-9 == result["uniform_entropy"] + 1e-9
    assert "rises" in result["trend"] or "falls" in result["trend"] or "does not change" in result["trend"]


def test_depth_trend_is_decided_by_two_standard_errors():
    steady = [[1.0, 1.1, 0.9, 1.0], [2.0, 2.1, 1.9, 2.0], [3.0, 3.1, 2.9, 3.0]]
    assert depth_trend(steady) == "rises at every layer"
    assert depth_trend(steady[::-1]) == "falls at every layer"
    assert (
        depth_trend([steady[0], steady[0], steady[2]]) == "rises from the first layer to the last, not at every layer"
    )
    assert depth_trend([[1.0, 2.0, 1.0, 2.0], [2.0, 1.0, 2.0, 1.0]]).startswith("does not change")


def test_a_convnets_receptive_field_grows_by_depth():
    fields = receptive_fields(build_registered("cnn-seed"))
    # conv3 -> 3; pool2 -> 4 (jump 2); conv3 -> 4 + 2 * 2 = 8; pool2 -> 10 (jump 4); conv3 -> 10 + 2 * 4 = 18
    assert [f["rf"] for f in fields] == [3, 4, 8, 10, 18]
    assert [f["jump"] for f in fields] == [1, 2, 2, 4, 4]


def test_an_encoder_gets_only_the_attention_probe():
    encoder = build_registered("vit-digits", **TINY, num_classes=0).eval()
    with pytest.raises(ConfigError, match="no classifier head"):
        run_probes(encoder, torch.randn(4, 1, 8, 8), None, ["permute"])
    assert "mean_distance" in run_probes(encoder, torch.randn(4, 1, 8, 8), None, ["attention"])["attention"]


def test_explain_probe_all_writes_its_files(run_folder, tmp_path, capsys):
    out = tmp_path / "probes"
    assert main(["explain", str(run_folder), "--probe", "all", "--samples", "200", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Patches shuffled" in printed and "mean attention distance" in printed
    report = json.loads((out / "probes.json").read_text())
    assert set(report) >= {"permute", "shift", "occlude", "resolution", "attention"} and report["images"] == 200
    assert (out / "probes.md").is_file() and (out / "attention_depth.png").is_file()
    assert main(["explain", str(run_folder), "--probe", "twist", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "--probe takes permute" in err and len(err.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def run_folder(digits_run, tmp_path_factory):
    from vitlab.runs import DataConfig, save_checkpoint

    folder = tmp_path_factory.mktemp("run")
    save_checkpoint(
        digits_run.model,
        folder / "best" / "model.safetensors",
        "classifier",
        DataConfig.from_splits(digits_run.splits),
        name=digits_run.config.model,
    )
    return folder
