"""Captioned shapes: every caption is exactly what is drawn (read back from the pixels), parses back to
its scene, and tokenises over the vocabulary."""

import numpy as np
import pytest
import torch
from scipy import ndimage

from vitlab.data.captions import (
    COLOURS,
    VOCAB,
    Description,
    Thing,
    caption_holds,
    description_codes,
    generate_captioned_shapes,
    hard_negatives,
    load_caption_splits,
    parse_caption,
    perturb,
    tokenize,
)
from vitlab.data.shapes import SHAPE_CLASSES
from vitlab.errors import DataError


@pytest.fixture(scope="module")
def data():
    return generate_captioned_shapes(300, 32, seed=5)


def drawn_shape(mask: np.ndarray) -> str:
    """The shape class of one object's pixels: a filled box is a square or a bar (by its aspect), a shape
    with far more pixels in the lower half of its box than in the upper a triangle, the rest a circle."""
    rows, cols = np.nonzero(mask)
    h, w = np.ptp(rows) + 1, np.ptp(cols) + 1
    if mask.sum() == h * w:
        return "bar" if max(h, w) / min(h, w) > 1.6 else "square"
    widths = mask[rows.min() : rows.max() + 1].sum(1)
    upper, lower = widths[: h // 2].sum(), widths[(h + 1) // 2 :].sum()
    return "triangle" if lower > 1.8 * upper else "circle"


def drawn_colour(image: torch.Tensor, mask: np.ndarray) -> str:
    mean = image.permute(1, 2, 0).numpy()[mask].mean(0)
    return min(COLOURS, key=lambda name: np.abs(np.asarray(COLOURS[name]) - mean).sum())


def drawn_things(image: torch.Tensor, objects: np.ndarray, scene: Description) -> list[np.ndarray]:
    """Per object the scene names, its pixel mask; a count's are its connected components."""
    if scene.layout == "count":
        parts, n = ndimage.label(objects == 1)
        return [parts == k for k in range(1, n + 1)]
    return [objects == k for k in range(1, len(scene.things) + 1)]


def test_every_caption_is_what_is_drawn(data):
    for image, objects, scene in zip(data.images, data.objects.numpy(), data.scenes):
        masks = drawn_things(image, objects, scene)
        assert len(masks) == scene.count
        things = [scene.things[0]] * scene.count if scene.layout == "count" else list(scene.things)
        for mask, thing in zip(masks, things):
            assert (drawn_shape(mask), drawn_colour(image, mask)) == (thing.shape, thing.colour)
        if scene.layout == "pair":
            (r0, c0), (r1, c1) = (np.nonzero(m) for m in masks)
            axis0, axis1 = (r0, r1) if scene.relation == "above" else (c0, c1)
            assert axis0.max() < axis1.min()  # wholly above / wholly left of the second


def test_captions_parse_back_to_their_scenes(data):
    for caption, scene in zip(data.captions, data.scenes):
        assert parse_caption(caption) in (scene, scene.plain())
    said = description_codes([parse_caption(c) for c in data.captions])
    assert caption_holds(description_codes(data.scenes), said).diagonal().all()


def test_the_four_relations_and_what_a_caption_holds_for():
    a, b = Thing("circle", "red"), Thing("square", "blue")
    above = Description("pair", (a, b), "above", 2)
    assert parse_caption("a red circle above a blue square") == above
    assert parse_caption("A photo of a blue square below a red circle.") == above
    left = parse_caption("an image of a blue square to the right of a red circle")
    assert left == Description("pair", (a, b), "left of", 2)
    assert parse_caption("a picture of three green bars") == Description("count", (Thing("bar", "green"),), None, 3)
    scenes = description_codes([above, left])
    said = description_codes(
        [
            parse_caption(t)
            for t in (
                "a circle above a square",
                "a red circle above a red square",
                "a circle to the left of a blue square",
            )
        ]
    )
    assert caption_holds(scenes, said).tolist() == [[True, False, False], [False, False, True]]
    with pytest.raises(DataError, match="outside the grammar"):
        parse_caption("circle red")
    with pytest.raises(DataError, match="colour"):
        parse_caption("a pink circle")


def test_the_same_seed_gives_the_same_scenes_and_splits_are_disjoint():
    one, two = generate_captioned_shapes(20, 32, seed=1), generate_captioned_shapes(20, 32, seed=1)
    assert torch.equal(one.images, two.images) and one.captions == two.captions
    assert generate_captioned_shapes(20, 32, seed=2).captions != one.captions
    splits = load_caption_splits(40, 32, seed=0)
    assert (len(splits.train), len(splits.val), len(splits.test)) == (28, 6, 6)
    rows = [img.flatten() for part in (splits.train, splits.val, splits.test) for img in part.images]
    assert len({tuple(r[:8].tolist()) for r in rows}) == 40


def test_shape_labels_mark_the_scenes_of_one_shape_class(data):
    labels = data.shape_labels()
    for label, scene in zip(labels.tolist(), data.scenes):
        shapes = {t.shape for t in scene.things}
        assert label == (SHAPE_CLASSES.index(shapes.pop()) if len(shapes) == 1 else -1)


def test_tokenize_maps_words_then_end_then_padding():
    ids = tokenize(["a red circle", "Two Blue Squares"], context_length=6)
    assert [VOCAB[i] for i in ids[0]] == ["a", "red", "circle", "<eos>", "<pad>", "<pad>"]
    assert [VOCAB[i] for i in ids[1]][:4] == ["two", "blue", "squares", "<eos>"]
    with pytest.raises(DataError, match="outside the vocabulary"):
        tokenize(["a dog"])
    with pytest.raises(DataError, match="at most 2"):
        tokenize(["a red circle"], context_length=3)


def every_perturbation(caption: str, draws: int = 3000) -> set[Description]:
    rng = np.random.default_rng(0)
    return {perturb(parse_caption(caption), rng) for _ in range(draws)}


def test_perturb_moves_exactly_one_said_attribute():
    red, blue = Thing("circle", "red"), Thing("square", "blue")
    colours = {(Thing("circle", c), blue) for c in COLOURS if c != "red"}
    colours |= {(red, Thing("square", c)) for c in COLOURS if c != "blue"}
    shapes = {(Thing(s, "red"), blue) for s in SHAPE_CLASSES if s != "circle"}
    shapes |= {(red, Thing(s, "blue")) for s in SHAPE_CLASSES if s != "square"}
    swapped = {(blue, red), (Thing("circle", "blue"), Thing("square", "red"))}  # the order; the colours
    expected = {Description("pair", things, "above", 2) for things in colours | shapes | swapped}
    expected.add(Description("pair", (red, blue), "left of", 2))
    assert every_perturbation("a red circle above a blue square") == expected
    assert every_perturbation("two green bars") == {
        *(Description("count", (Thing("bar", c),), None, 2) for c in COLOURS if c != "green"),
        *(Description("count", (Thing(s, "green"),), None, 2) for s in SHAPE_CLASSES if s != "bar"),
        Description("count", (Thing("bar", "green"),), None, 3),
    }
    assert every_perturbation("a photo of a circle") == {Description("one", (Thing(s),)) for s in SHAPE_CLASSES[1:]}
    same = every_perturbation("a circle above a circle")  # no order to swap; no colour to change
    assert Description("pair", (Thing("circle"),) * 2, "left of", 2) in same and len(same) == 7


def test_hard_negatives_keep_the_opening_and_are_false_of_their_image(data):
    negatives = hard_negatives(data.captions, np.random.default_rng(1))
    said = description_codes([parse_caption(c) for c in negatives])
    assert not caption_holds(description_codes(data.scenes), said).diagonal().any()
    openings = ("a photo of ", "a picture of ", "an image of ")
    for caption, negative in zip(data.captions, negatives):
        opening = next((o for o in openings if caption.startswith(o)), "")
        assert next((o for o in openings if negative.startswith(o)), "") == opening and negative != caption
