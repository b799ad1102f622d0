"""The CLIP model: its config's ranges, text pooling, the checkpoint round trip, zero-shot helpers."""

import pytest
import torch

from vitlab.data.captions import tokenize
from vitlab.errors import ConfigError, DataError
from vitlab.models import CLIPConfig, CLIPModel, build_registered
from vitlab.runs import DataConfig, load_checkpoint, save_checkpoint
from vitlab.tasks.clip import classify, rank_captions

TINY = {
    "vision": {
        "img_size": 16,
        "patch_size": 4,
        "num_classes": 0,
        "embed_dim": 32,
        "depth": 1,
        "num_heads": 2,
        "pool": "mean",
        "class_token": False,
    },
    "text_width": 32,
    "text_depth": 1,
    "text_heads": 2,
    "embed_dim": 16,
}


def tiny(**overrides) -> CLIPModel:
    torch.manual_seed(0)
    model = build_registered("clip-shapes", **{**TINY, **overrides})
    assert isinstance(model, CLIPModel)
    return model.eval()


@pytest.mark.parametrize(
    "bad,match",
    [
        ({"vision": {"num_classes": 10}}, "num_classes must be 0"),
        ({"text_pool": "max"}, "text_pool"),
        ({"text_width": 30, "text_heads": 4}, "not divisible"),
        ({"logit_scale_init": 200.0}, "above max_logit_scale"),
        ({"mean": (0.5,)}, "one value per image channel"),
    ],
)
def test_config_refuses_values_out_of_range(bad, match):
    with pytest.raises(ConfigError, match=match):
        CLIPConfig(**{**TINY, "vision": {**TINY["vision"], **bad.pop("vision", {})}, **bad})


@pytest.mark.parametrize("pool", ["eos", "mean"])
def test_a_caption_embeds_the_same_alone_and_in_a_batch_and_padding_slots_are_not_pooled(pool):
    model = tiny(text_pool=pool)
    texts = ["a red circle", "a photo of two blue squares", "a bar above a green circle"]
    ids = tokenize(texts)
    together = model.encode_text(ids)
    for i in range(3):
        torch.testing.assert_close(model.encode_text(ids[i : i + 1]), together[i : i + 1])
    assert torch.allclose(together.norm(dim=-1), torch.ones(3))
    features = model.text_features(ids[:1])
    tokens = model.text(ids[:1])[0]
    expected = tokens[3] if pool == "eos" else tokens[:4].mean(0)  # 3 words, then <eos> in slot 3
    torch.testing.assert_close(features[0], expected)


def test_logits_are_the_clamped_scale_times_cosines():
    model = tiny(max_logit_scale=50.0)
    with torch.no_grad():
        model.logit_scale.fill_(10.0)  # exp(10) far above the clamp
    images, ids = torch.rand(2, 3, 16, 16), tokenize(["a red circle", "two bars", "a square"])
    per_image, per_text = model(images, ids)
    cosines = model.encode_image(images) @ model.encode_text(ids).T
    torch.testing.assert_close(per_image, 50.0 * cosines)
    torch.testing.assert_close(per_text, per_image.T)


def test_checkpoint_round_trip_rebuilds_the_same_model(tmp_path):
    model = tiny(mean=(0.4, 0.5, 0.6), std=(0.2, 0.25, 0.3))
    data = DataConfig((16, 16), 3, (0.0,) * 3, (1.0,) * 3, ["circle", "square", "triangle", "bar"], "unit", "shapes")
    path = save_checkpoint(model, tmp_path / "clip.safetensors", "clip", data)
    loaded = load_checkpoint(path)
    assert loaded.kind == "clip" and loaded.name == "clip-shapes" and loaded.model.config == model.config
    assert loaded.data.classes == data.classes
    images, ids = torch.rand(3, 3, 16, 16), tokenize(["a red circle", "two bars", "a square"])
    with torch.no_grad():
        for got, expected in zip(loaded.model(images, ids), model(images, ids)):
            torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_zero_shot_probabilities_and_caption_ranking_agree_with_the_embeddings():
    model = tiny()
    images = torch.rand(4, 3, 16, 16)
    probs = classify(model, images, ["circle", "bar"], templates=("a {}",))
    expected = model.scale() * model.encode_image(images) @ model.encode_text(tokenize(["a circle", "a bar"])).T
    torch.testing.assert_close(probs, expected.softmax(-1))
    templates = ("a {0}", "two {0}s", "a {0} above a {0}")
    texts = model.encode_text(tokenize([t.format(c) for c in ("circle", "bar") for t in templates]))
    per_template = (model.encode_image(images) @ texts.T).view(4, 2, 3)  # (images, classes, templates)
    best = model.scale() * per_template.amax(-1)  # each class's best template
    torch.testing.assert_close(classify(model, images, ["circle", "bar"], templates), best.softmax(-1))
    mean_text = torch.nn.functional.normalize(texts.view(2, 3, -1).mean(1), dim=-1)
    mean = model.scale() * model.encode_image(images) @ mean_text.T
    torch.testing.assert_close(classify(model, images, ["circle", "bar"], templates, ensemble="mean"), mean.softmax(-1))
    with pytest.raises(DataError, match="ensemble"):
        classify(model, images, ["circle"], ensemble="vote")
    captions = ["a circle", "a bar", "two red squares"]
    ranked = rank_captions(model, images[0], captions)
    logits = model.scale() * model.encode_image(images[:1]) @ model.encode_text(tokenize(captions)).T
    expected = sorted(zip(captions, logits[0].softmax(-1).tolist()), key=lambda pair: -pair[1])
    assert [c for c, _ in ranked] == [c for c, _ in expected]
    assert [p for _, p in ranked] == pytest.approx([p for _, p in expected])
