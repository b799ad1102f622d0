"""Captioned shapes: generated scenes, each with a caption that says exactly what is drawn.

A scene is one of three layouts of shapes (:data:`~vitlab.data.shapes.SHAPE_CLASSES`) in named
colours (:data:`COLOURS`) on a textured background, and its caption comes from a small grammar::

    one     "a red circle"
    pair    "a red circle above a blue square"     relations: above, below, to the left of, to the right of
    count   "two green triangles", "three blue bars"

A caption may open with "a photo of", "a picture of" or "an image of", and with probability ``plain``
names no colours ("a circle above a square"). Pairs are drawn with the first object wholly above
(or wholly left of) the second, so every relation is unambiguous; objects never touch.

A :class:`Description` is what a caption means, in canonical form (a pair's first object is the one
above / on the left: "B below A" means "A above B"); :func:`parse_caption` reads one back from text,
:func:`description_codes` turns descriptions into integer rows, and :func:`caption_holds` says, for
every (image, caption) pair, whether the caption is true of the image's scene -- the exact ground truth
for retrieval. :func:`perturb` moves a description one said attribute away (false of its scene) and
:func:`hard_negatives` words such captions: the hard negatives of contrastive training. :func:`tokenize`
maps captions to word ids over :data:`VOCAB`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from ..errors import DataError
from .shapes import SHAPE_CLASSES, _texture, check_generated, shape_mask

COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (0.9, 0.1, 0.1),
    "green": (0.1, 0.7, 0.15),
    "blue": (0.1, 0.25, 0.95),
    "yellow": (0.95, 0.9, 0.1),
    "purple": (0.6, 0.1, 0.75),
    "white": (0.97, 0.97, 0.97),
}
COLOUR_NAMES = tuple(COLOURS)
LAYOUTS = ("one", "pair", "count")
RELATIONS = {
    "above": ("above", False),
    "below": ("above", True),
    "to the left of": ("left of", False),
    "to the right of": ("left of", True),
}  # wording -> (canonical relation, objects swapped)
COUNT_WORDS = {2: "two", 3: "three"}
PREFIXES = ("", "a photo of", "a picture of", "an image of")
PAD, EOS = "<pad>", "<eos>"
VOCAB: tuple[str, ...] = (
    PAD,
    EOS,
    "a",
    "an",
    "photo",
    "picture",
    "image",
    "of",
    "the",
    "to",
    "left",
    "right",
    "above",
    "below",
    *COUNT_WORDS.values(),
    *COLOUR_NAMES,
    *SHAPE_CLASSES,
    *(f"{s}s" for s in SHAPE_CLASSES),
)
WORD_IDS = {w: i for i, w in enumerate(VOCAB)}
CONTEXT_LENGTH = 16
"""Word slots of a tokenised caption: the longest caption (13 words) and its end token fit."""


@dataclass(frozen=True)
class Thing:
    """One object a caption names: its shape (a :data:`SHAPE_CLASSES` name) and colour (``None``: not said)."""

    shape: str
    colour: str | None = None

    def words(self, plural: bool = False) -> str:
        colour = f"{self.colour} " if self.colour else ""
        return f"{colour}{self.shape}s" if plural else f"a {colour}{self.shape}"


@dataclass(frozen=True)
class Description:
    """What a caption means: ``layout`` (one | pair | count), its ``things`` (one, or a pair's two with
    the upper / left one first), a pair's canonical ``relation`` (``"above"`` or ``"left of"``), and
    how many objects a count shows."""

    layout: str
    things: tuple[Thing, ...]
    relation: str | None = None
    count: int = 1

    def plain(self) -> Description:
        """The same description with no colours named."""
        return replace(self, things=tuple(Thing(t.shape) for t in self.things))

    def shape_class(self) -> int:
        """The index in :data:`SHAPE_CLASSES` of the one shape class the scene shows, or -1 for two classes."""
        shapes = {t.shape for t in self.things}
        return SHAPE_CLASSES.index(shapes.pop()) if len(shapes) == 1 else -1


def describe(desc: Description, rng: np.random.Generator, prefix: str = "") -> str:
    """A caption for ``desc``: a pair worded either way round (drawn from ``rng``), after ``prefix``."""
    if desc.layout == "one":
        body = desc.things[0].words()
    elif desc.layout == "count":
        body = f"{COUNT_WORDS[desc.count]} {desc.things[0].words(plural=True)}"
    else:
        a, b = desc.things
        swapped = bool(rng.random() < 0.5)
        wording = next(w for w, (rel, swap) in RELATIONS.items() if rel == desc.relation and swap == swapped)
        first, second = (b, a) if swapped else (a, b)
        body = f"{first.words()} {wording} {second.words()}"
    return f"{prefix} {body}" if prefix else body


def _alternatives(desc: Description) -> list[list[Description]]:
    """Per kind of change (a colour, a shape, the count, the pair's order, its colours, its relation), the
    descriptions one said attribute away from ``desc``; a kind that cannot apply gives no list."""
    things = desc.things

    def one_changed(i: int, **change: str) -> Description:
        return replace(desc, things=things[:i] + (replace(things[i], **change),) + things[i + 1 :])

    kinds = [
        [one_changed(i, colour=c) for i, t in enumerate(things) if t.colour for c in COLOURS if c != t.colour],
        [one_changed(i, shape=s) for i, t in enumerate(things) for s in SHAPE_CLASSES if s != t.shape],
    ]
    if desc.layout == "count":
        kinds.append([replace(desc, count=n) for n in COUNT_WORDS if n != desc.count])
    if desc.layout == "pair":
        a, b = things
        kinds.append([replace(desc, things=(b, a))] if a != b else [])
        recoloured = (replace(a, colour=b.colour), replace(b, colour=a.colour))
        kinds.append([replace(desc, things=recoloured)] if a.colour and b.colour and a.colour != b.colour else [])
        kinds.append([replace(desc, relation="left of" if desc.relation == "above" else "above")])
    return [k for k in kinds if k]


def perturb(desc: Description, rng: np.random.Generator) -> Description:
    """A description one said attribute away from ``desc`` -- so false of every scene ``desc`` is true of:
    a kind of change drawn uniformly from those that apply (a colour or a shape of one object, a count's
    number, a pair's order, its two colours swapped, its relation's axis), then one such change. The
    hard negatives of contrastive training: "a blue square above a red circle" against "a red circle
    above a blue square"."""
    kinds = _alternatives(desc)
    kind = kinds[int(rng.integers(len(kinds)))]
    return kind[int(rng.integers(len(kind)))]


def hard_negatives(captions: list[str], rng: np.random.Generator) -> list[str]:
    """Per caption, a caption of the same opening words that :func:`perturb` moved one said attribute
    away, so false of the caption's image."""
    out = []
    for text in captions:
        words = _words(text)
        prefix = next((p for p in PREFIXES if p and words[: len(p.split())] == p.split()), "")
        out.append(describe(perturb(parse_caption(text), rng), rng, prefix))
    return out


def _words(text: str) -> list[str]:
    return text.lower().replace(".", " ").split()


def _thing(words: list[str], plural: bool, text: str) -> Thing:
    """``[colour] shape`` (or plural shapes) -> :class:`Thing`."""
    *colour, shape = words
    shape = shape[:-1] if plural and shape.endswith("s") else shape
    if shape not in SHAPE_CLASSES or len(colour) > 1 or (colour and colour[0] not in COLOURS):
        raise DataError(
            f"cannot read {' '.join(words)!r} in caption {text!r} as [colour] shape: colours are "
            f"{COLOUR_NAMES}, shapes {SHAPE_CLASSES}"
        )
    return Thing(shape, colour[0] if colour else None)


def parse_caption(text: str) -> Description:
    """The :class:`Description` a caption of this module's grammar means; raises :class:`DataError` for
    text outside it."""
    words = _words(text)
    for prefix in (p.split() for p in PREFIXES if p):
        if words[: len(prefix)] == prefix:
            words = words[len(prefix) :]
            break
    if words and words[0] in COUNT_WORDS.values():
        count = next(n for n, w in COUNT_WORDS.items() if w == words[0])
        return Description("count", (_thing(words[1:], True, text),), None, count)
    for wording, (relation, swapped) in RELATIONS.items():
        rel = wording.split()
        at = next((i for i in range(1, len(words)) if words[i : i + len(rel)] == rel), None)
        if at is not None:
            first, second = words[:at], words[at + len(rel) :]
            if first[:1] != ["a"] or second[:1] != ["a"]:
                break
            a, b = _thing(first[1:], False, text), _thing(second[1:], False, text)
            return Description("pair", (b, a) if swapped else (a, b), relation, 2)
    if words[:1] == ["a"]:
        return Description("one", (_thing(words[1:], False, text),))
    raise DataError(
        f"caption {text!r} is outside the grammar: e.g. 'a red circle', 'two blue squares', "
        f"'a red circle above a blue square'"
    )


# -- drawing ----------------------------------------------------------------------------------------


@dataclass
class CaptionedShapes:
    """Scenes: ``images (N, 3, H, W)`` in [0, 1], ``objects (N, H, W)`` int64 (which object, 1-based in
    the order of ``scenes[i].things`` -- a count's objects all 1..count; 0 = background), the full
    ``scenes`` (every colour named) and their ``captions``."""

    images: torch.Tensor
    objects: torch.Tensor
    scenes: list[Description]
    captions: list[str]

    def __len__(self) -> int:
        return len(self.images)

    def subset(self, index: torch.Tensor | list[int]) -> CaptionedShapes:
        rows = torch.as_tensor(index, dtype=torch.long)
        return CaptionedShapes(
            self.images[rows],
            self.objects[rows],
            [self.scenes[i] for i in rows.tolist()],
            [self.captions[i] for i in rows.tolist()],
        )

    def shape_labels(self) -> torch.Tensor:
        """``(N,)`` the shape class each scene shows, -1 where it shows two (the zero-shot task's labels)."""
        return torch.tensor([s.shape_class() for s in self.scenes], dtype=torch.long)


@dataclass
class CaptionSplits:
    """Train / val / test captioned shapes (a seeded 70/15/15 split)."""

    name: str
    train: CaptionedShapes
    val: CaptionedShapes
    test: CaptionedShapes


def _extent(kind: int, r: float, bar: tuple[float, float]) -> tuple[float, float]:
    """Half-width and half-height of a shape of radius ``r`` (see :func:`~vitlab.data.shapes.shape_mask`)."""
    return bar if kind == 3 else (0.85 * r, 0.85 * r) if kind == 1 else (r, r)


def _separated(a: tuple[float, ...], b: tuple[float, ...], gap: float) -> tuple[bool, bool]:
    """Whether box ``a = (cx, cy, ex, ey)`` lies wholly above / wholly left of box ``b``, ``gap`` apart."""
    above = a[1] + a[3] + gap <= b[1] - b[3] and b[1] - a[1] > abs(b[0] - a[0])
    left = a[0] + a[2] + gap <= b[0] - b[2] and b[0] - a[0] > abs(b[1] - a[1])
    return above, left


def _place(
    kinds: list[int], relation: str | None, rng: np.random.Generator, size: int
) -> list[tuple[tuple[float, float], float, tuple[float, float]]] | None:
    """Centres, radii and bar half-sides for ``kinds``: inside the image, apart, and for a pair in
    ``relation``; ``None`` when 200 draws found no such layout."""
    low, high = (0.2, 0.3) if len(kinds) == 1 else (0.12, 0.19)
    for _ in range(200):
        placed, boxes = [], []
        for kind in kinds:
            r = rng.uniform(low, high) * size
            long, short = r * rng.uniform(1.2, 1.5), r * rng.uniform(0.35, 0.5)
            bar = (long, short) if rng.random() < 0.5 else (short, long)
            ex, ey = _extent(kind, r, bar)
            cx, cy = rng.uniform(ex + 1, size - ex - 1), rng.uniform(ey + 1, size - ey - 1)
            placed.append(((cx, cy), r, bar))
            boxes.append((cx, cy, ex, ey))
        apart = all(
            any(_separated(p, q, 2.0)) or any(_separated(q, p, 2.0))
            for i, p in enumerate(boxes)
            for q in boxes[i + 1 :]
        )
        if relation is not None:
            apart = apart and _separated(boxes[0], boxes[1], 2.0)[relation == "left of"]
        if apart:
            return placed
    return None


def _thing_drawn(rng: np.random.Generator) -> Thing:
    """A random shape in a random colour."""
    return Thing(
        SHAPE_CLASSES[int(rng.integers(len(SHAPE_CLASSES)))], COLOUR_NAMES[int(rng.integers(len(COLOUR_NAMES)))]
    )


def _scene(rng: np.random.Generator, layouts: tuple[float, float, float]) -> Description:
    """A random full :class:`Description` (every colour named)."""
    layout = LAYOUTS[int(rng.choice(3, p=layouts))]
    if layout == "one":
        return Description("one", (_thing_drawn(rng),))
    if layout == "count":
        return Description("count", (_thing_drawn(rng),), None, int(rng.integers(2, 4)))
    a, b = _thing_drawn(rng), _thing_drawn(rng)
    while b == a:
        b = _thing_drawn(rng)
    return Description("pair", (a, b), ("above", "left of")[int(rng.integers(2))], 2)


def _background(colours: list[str], rng: np.random.Generator, size: int) -> np.ndarray:
    """A texture (:func:`~vitlab.data.shapes._texture`) whose mean colour is far (L1 >= 0.6) from every one of
    ``colours``; after 20 draws the last is kept."""
    for _ in range(20):
        img = _texture(rng, size)
        mean = img.reshape(-1, 3).mean(0)
        if all(np.abs(np.asarray(COLOURS[c]) - mean).sum() >= 0.6 for c in colours):
            break
    return img


def generate_captioned_shapes(
    count: int,
    image_size: int = 32,
    seed: int = 0,
    plain: float = 0.2,
    layouts: tuple[float, float, float] = (0.3, 0.45, 0.25),
) -> CaptionedShapes:
    """``count`` seeded scenes of ``image_size x image_size`` with their captions (see the module
    docstring); ``layouts`` are the probabilities of one / pair / count, ``plain`` that a caption
    names no colours."""
    if count < 1 or image_size < 16 or not 0 <= plain <= 1:
        raise DataError(
            f"count={count}, image_size={image_size}, plain={plain}: need count >= 1, "
            f"image_size >= 16 and plain in [0, 1]"
        )
    check_generated("captioned shapes", count, image_size)
    rng = np.random.default_rng(seed)
    images = np.empty((count, image_size, image_size, 3), np.float32)
    objects = np.zeros((count, image_size, image_size), np.int64)
    scenes, captions = [], []
    for i in range(count):
        placed = None
        while placed is None:
            scene = _scene(rng, layouts)
            kinds = [SHAPE_CLASSES.index(t.shape) for t in scene.things] * (
                scene.count if scene.layout == "count" else 1
            )
            placed = _place(kinds, scene.relation, rng, image_size)
        colours = [t.colour for t in scene.things for _ in range(len(kinds) // len(scene.things))]
        img = _background([c for c in colours if c], rng, image_size)
        for j, (kind, colour, (centre, r, bar)) in enumerate(zip(kinds, colours, placed)):
            mask = shape_mask(kind, centre, r, image_size, bar)
            img[mask] = np.asarray(COLOURS[colour or "white"]) + rng.normal(0, 0.03, (int(mask.sum()), 3))
            objects[i][mask] = 1 if scene.layout == "count" else j + 1
        images[i] = img.clip(0, 1)
        prefix = PREFIXES[int(rng.integers(len(PREFIXES)))]
        said = scene.plain() if rng.random() < plain else scene
        scenes.append(scene)
        captions.append(describe(said, rng, prefix))
    return CaptionedShapes(
        torch.from_numpy(images).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(objects), scenes, captions
    )


def load_caption_splits(count: int = 5000, image_size: int = 32, seed: int = 0, plain: float = 0.2) -> CaptionSplits:
    """``count`` generated captioned scenes split 70/15/15 (seeded)."""
    data = generate_captioned_shapes(count, image_size, seed, plain)
    order = torch.randperm(count, generator=torch.Generator().manual_seed(seed))
    a, b = int(0.7 * count), int(0.85 * count)
    if a == 0 or b == a or b == count:
        raise DataError(f"{count} scenes are too few to split 70/15/15: use at least 7")
    return CaptionSplits("shapes", data.subset(order[:a]), data.subset(order[a:b]), data.subset(order[b:]))


# -- codes and tokens -------------------------------------------------------------------------------


def description_codes(descriptions: list[Description]) -> torch.Tensor:
    """``(N, 7)`` int64 rows ``(layout, relation, count, shape a, shape b, colour a, colour b)``; -1 for a
    colour not said (and for a missing second object or relation)."""
    rows = []
    for d in descriptions:
        things = list(d.things) + [Thing("", None)] * (2 - len(d.things))
        rows.append(
            [
                LAYOUTS.index(d.layout),
                -1 if d.relation is None else ("above", "left of").index(d.relation),
                d.count,
                *(SHAPE_CLASSES.index(t.shape) if t.shape else -1 for t in things),
                *(-1 if t.colour is None else COLOUR_NAMES.index(t.colour) for t in things),
            ]
        )
    return torch.tensor(rows, dtype=torch.long).reshape(-1, 7)


def caption_holds(scenes: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
    """``(N, M)`` bool: caption ``j`` is true of scene ``i``. ``scenes (N, 7)`` and ``captions (M, 7)``
    are :func:`description_codes`; a colour the caption does not say matches any."""
    s, c = scenes[:, None, :], captions[None, :, :]
    return ((s == c) | ((c == -1) & (torch.arange(7, device=c.device) >= 5))).all(-1)


def tokenize(captions: list[str], context_length: int = CONTEXT_LENGTH) -> torch.Tensor:
    """Captions -> word ids ``(B, context_length)`` int64 over :data:`VOCAB`: the words, ``<eos>``, then
    ``<pad>`` (id 0). Raises :class:`DataError` for a word outside the vocabulary or a caption too long."""
    ids = torch.zeros(len(captions), context_length, dtype=torch.long)
    for i, text in enumerate(captions):
        words = _words(text)
        unknown = [w for w in words if w not in WORD_IDS or w in (PAD, EOS)]
        if unknown:
            raise DataError(
                f"caption {text!r} has words outside the vocabulary {unknown}: use words of {sorted(VOCAB[2:])}"
            )
        if len(words) + 1 > context_length:
            raise DataError(
                f"caption {text!r} has {len(words)} words; the model reads at most {context_length - 1}: shorten it"
            )
        ids[i, : len(words) + 1] = torch.tensor([WORD_IDS[w] for w in words] + [WORD_IDS[EOS]])
    return ids


__all__ = [
    "COLOURS",
    "CONTEXT_LENGTH",
    "CaptionSplits",
    "CaptionedShapes",
    "Description",
    "Thing",
    "VOCAB",
    "caption_holds",
    "description_codes",
    "generate_captioned_shapes",
    "hard_negatives",
    "load_caption_splits",
    "parse_caption",
    "perturb",
    "tokenize",
]
