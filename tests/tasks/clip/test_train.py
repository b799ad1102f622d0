"""CLIP runs on the engine, tiny: train -> run folder -> clip checkpoint -> predict, through the CLI too."""

import json

import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.data.captions import (
    VOCAB,
    caption_holds,
    description_codes,
    generate_captioned_shapes,
    load_caption_splits,
    parse_caption,
    tokenize,
)
from vitlab.engine.distributed import DistEnv
from vitlab.errors import ConfigError
from vitlab.runs import load_checkpoint
from vitlab.tasks import run as run_task
from vitlab.tasks.clip import (
    CLIPTask,
    CLIPTrainConfig,
    build_clip_model,
    embed_images,
    embed_texts,
    evaluate_clip,
    retrieval_metrics,
)

SMALL = {
    "vision": {"embed_dim": 32, "depth": 1, "num_heads": 2},
    "text_width": 32,
    "text_depth": 1,
    "text_heads": 2,
    "embed_dim": 32,
}


def test_config_splits_run_fields_from_model_fields_and_refuses_unknown_ones():
    config = CLIPTrainConfig.from_options({"epochs": 3, "count": 50, "embed_dim": 16, "vision": {"depth": 1}})
    assert (config.epochs, config.count) == (3, 50)
    assert config.model_overrides == {"embed_dim": 16, "vision": {"depth": 1}}
    with pytest.raises(ConfigError, match="unknown option .depthh.*CLIPTrainConfig nor of the CLIPConfig"):
        CLIPTrainConfig.from_options({"depthh": 2})
    with pytest.raises(ConfigError, match="plain"):
        CLIPTrainConfig(plain=1.5)


def test_a_batch_holds_the_images_captions_then_their_hard_negatives():
    splits = load_caption_splits(60, 32, seed=0)
    config = CLIPTrainConfig(count=60, negatives=2, device="cpu", model_overrides=SMALL)
    task = CLIPTask(build_clip_model(config, splits), splits, config)
    task.prepare(DistEnv(0, 1, 0, torch.device("cpu")), amp=False)
    task.start_epoch(0, seed=3)
    index = torch.tensor([5, 0, 9, 2, 7])
    images, ids, positives = task.batch(index)
    captions = [splits.train.captions[i] for i in index.tolist()]
    assert torch.equal(images, splits.train.images[index]) and torch.equal(ids[:5], tokenize(captions))
    assert ids.shape == (15, ids.shape[1]) and positives.shape == (5, 15)
    texts = [" ".join(VOCAB[i] for i in row if i > 1) for row in ids.tolist()]
    scenes = description_codes([splits.train.scenes[i] for i in index.tolist()])
    assert torch.equal(positives, caption_holds(scenes, description_codes([parse_caption(t) for t in texts])))
    assert positives[:, :5].diagonal().all()
    assert not positives[:, 5:10].diagonal().any() and not positives[:, 10:].diagonal().any()
    task.start_epoch(1, seed=4)
    assert not torch.equal(task.batch(index)[1][5:], ids[5:])  # fresh negatives every epoch


def test_retrieval_ranks_the_distinct_captions_each_true_of_its_images():
    data = generate_captioned_shapes(300, 32, seed=7)
    distinct = list(dict.fromkeys(data.captions))
    assert len(distinct) < len(data)  # images share captions ("a square")
    config = CLIPTrainConfig(count=300, device="cpu", model_overrides=SMALL)
    torch.manual_seed(0)
    model = build_clip_model(config, load_caption_splits(300, 32, seed=7)).eval()
    got = evaluate_clip(model, data)
    scenes, images = description_codes(data.scenes), embed_images(model, data.images)

    def metrics(captions: list[str]) -> dict[str, float]:
        relevant = caption_holds(scenes, description_codes([parse_caption(c) for c in captions]))
        return retrieval_metrics(images, embed_texts(model, captions), relevant)

    assert {k: got[k] for k in ("i2t_r1", "i2t_r5", "t2i_r1", "t2i_r5")} == pytest.approx(metrics(distinct))
    assert metrics(data.captions)["i2t_r1"] == pytest.approx(got["i2t_r1"])  # a copy of a caption ties with it


@pytest.mark.slow
def test_a_tiny_run_beats_chance_and_its_checkpoint_scores_the_same(tmp_path):
    run = tmp_path / "run"
    config = CLIPTrainConfig(
        count=2000,
        epochs=15,
        batch_size=64,
        lr=2e-3,
        warmup_epochs=0.5,
        device="cpu",
        out_dir=str(run),
        model_overrides=SMALL,
    )
    splits = load_caption_splits(config.count, config.image_size, config.seed, config.plain)
    torch.manual_seed(0)
    chance = evaluate_clip(build_clip_model(config, splits).eval(), splits.test)  # the same model untrained
    result = run_task("clip", config, splits)
    test = result.test
    assert set(test) == set(chance) == {"i2t_r1", "i2t_r5", "t2i_r1", "t2i_r5", "zero_shot_acc"}
    assert test["i2t_r1"] > 3 * chance["i2t_r1"] and test["i2t_r5"] > chance["i2t_r5"] + 0.05, (test, chance)
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"] - 0.5
    assert result.checkpoint == run / "best" / "model.safetensors"
    assert json.loads((run / "run.json").read_text())["kind"] == "clip"
    loaded = load_checkpoint(run)
    assert loaded.kind == "clip" and loaded.model.config == result.model.config
    held_out = generate_captioned_shapes(60, 32, seed=99)
    assert evaluate_clip(loaded.model, held_out) == evaluate_clip(result.model, held_out)


@pytest.mark.slow
def test_cli_trains_a_clip_and_predict_ranks_captions(tmp_path, capsys):
    run = str(tmp_path / "run")
    flags = [
        "--task",
        "clip",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        run,
        "--set",
        "count=40",
        "--set",
        "warmup_epochs=0",
        "--set",
        "embed_dim=16",
        "--set",
        'vision={"embed_dim": 16, "depth": 1, "num_heads": 2}',
        "--set",
        "text_width=16",
        "--set",
        "text_depth=1",
    ]
    assert main(["train", *flags]) == 0
    assert "zero-shot shape accuracy" in capsys.readouterr().out
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["count"] == 40 and saved["model_overrides"]["vision"]["depth"] == 1
    image = tmp_path / "red.png"
    Image.new("RGB", (32, 32), (200, 10, 10)).save(image)
    assert main(["predict", run, str(image), "--captions", "a red circle", "two blue bars", "--device", "cpu"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{image}  zero-shot: ") and all(c in out[0] for c in ("circle", "bar"))
    assert sorted(line.split(maxsplit=1)[1] for line in out[1:]) == ["a red circle", "two blue bars"]
    probs = [float(line.split()[0]) for line in out[1:]]
    assert probs == sorted(probs, reverse=True) and sum(probs) == pytest.approx(1.0, abs=2e-3)
    assert main(["predict", run, str(image), "--captions", "a pink elephant", "--device", "cpu"]) == 2
    assert "outside the vocabulary" in capsys.readouterr().err
