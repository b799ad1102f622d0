"""Zero-shot use of a CLIP model: classes named by prompt templates, captions ranked for an image.

An image is scored against every class by ``exp(logit_scale)`` times a cosine: with ``ensemble="max"``
(the default) the cosine with the class's best-fitting template, with ``"mean"`` the cosine with the
normalised mean of its templates' unit embeddings (CLIP's prompt ensemble). The mean suits templates
that paraphrase one another ("a photo of a {0}", "a picture of a {0}"); :data:`TEMPLATES` are the
ways the caption grammar names a scene of one shape class -- one object, two, three, a pair -- which
describe different images, and an image fits one of them, not their average.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...data.captions import tokenize
from ...errors import DataError
from ...models.clip import CLIPModel

TEMPLATES = ("a {0}", "two {0}s", "three {0}s", "a {0} above a {0}", "a {0} to the left of a {0}")
"""One shape class in every layout of :mod:`vitlab.data.captions`: one object, a count, a pair."""
ENSEMBLES = ("max", "mean")


def _device(model: CLIPModel) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def embed_texts(model: CLIPModel, texts: Sequence[str], batch_size: int = 512) -> torch.Tensor:
    """Unit text embeddings ``(M, E)`` of ``texts`` (words of the model's vocabulary)."""
    ids = tokenize(list(texts), model.config.context_length).to(_device(model))
    return torch.cat([model.encode_text(ids[i : i + batch_size]) for i in range(0, len(ids), batch_size)])


@torch.no_grad()
def embed_images(model: CLIPModel, images: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """Unit image embeddings ``(N, E)`` of images ``(N, C, H, W)`` in [0, 1]."""
    device = _device(model)
    return torch.cat(
        [model.encode_image(images[i : i + batch_size].to(device)).float() for i in range(0, len(images), batch_size)]
    )


@torch.no_grad()
def template_embeddings(
    model: CLIPModel, class_names: Sequence[str], templates: Sequence[str] = TEMPLATES
) -> torch.Tensor:
    """``(K, T, E)``: the unit embedding of ``template.format(name)`` per class and template."""
    if not class_names or not templates:
        raise DataError("zero-shot classification needs at least one class name and one template")
    texts = [t.format(name) for name in class_names for t in templates]
    return embed_texts(model, texts).view(len(class_names), len(templates), -1)


@torch.no_grad()
def class_embeddings(
    model: CLIPModel, class_names: Sequence[str], templates: Sequence[str] = TEMPLATES
) -> torch.Tensor:
    """``(K, E)``: per class, the normalised mean of its :func:`template_embeddings` (CLIP's prompt ensemble)."""
    return torch.nn.functional.normalize(template_embeddings(model, class_names, templates).mean(1), dim=-1)


@torch.no_grad()
def classify(
    model: CLIPModel,
    images: torch.Tensor,
    class_names: Sequence[str],
    templates: Sequence[str] = TEMPLATES,
    ensemble: str = "max",
) -> torch.Tensor:
    """Zero-shot class probabilities ``(N, K)`` of images ``(N, C, H, W)`` in [0, 1] over ``class_names``,
    each class scored by its best template (``ensemble="max"``) or its mean embedding (``"mean"``)."""
    if ensemble not in ENSEMBLES:
        raise DataError(f"ensemble {ensemble!r} is not one of {ENSEMBLES}")
    model.eval()
    images_embedded = embed_images(model, images)
    if ensemble == "mean":
        cosines = images_embedded @ class_embeddings(model, class_names, templates).T
    else:
        cosines = torch.einsum("ne,kte->nkt", images_embedded, template_embeddings(model, class_names, templates))
        cosines = cosines.amax(-1)
    return (model.scale() * cosines).softmax(-1)


@torch.no_grad()
def rank_captions(model: CLIPModel, image: torch.Tensor, captions: Sequence[str]) -> list[tuple[str, float]]:
    """``(caption, probability)`` for one image ``(C, H, W)`` in [0, 1], the best-fitting caption first;
    probabilities are the softmax of the logits over ``captions``."""
    if not captions:
        raise DataError("rank_captions needs at least one caption")
    model.eval()
    logits = model.scale() * embed_images(model, image[None]) @ embed_texts(model, captions).T
    probs = logits[0].softmax(-1).tolist()
    return sorted(zip(captions, probs), key=lambda pair: -pair[1])


__all__ = [
    "ENSEMBLES",
    "TEMPLATES",
    "class_embeddings",
    "classify",
    "embed_images",
    "embed_texts",
    "rank_captions",
    "template_embeddings",
]
