"""Zero-shot use of a CLIP model: classes named by prompt templates, captions ranked for an image.

A class's text embedding is the normalised mean of its templates' unit embeddings (CLIP's prompt
ensemble); an image is scored against every class by ``exp(logit_scale)`` times the cosine.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..data.captions import tokenize
from ..errors import DataError
from ..models.clip import CLIPModel

TEMPLATES = ("a {}", "a photo of a {}", "a picture of a {}", "an image of a {}")


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
def class_embeddings(
    model: CLIPModel, class_names: Sequence[str], templates: Sequence[str] = TEMPLATES
) -> torch.Tensor:
    """``(K, E)``: per class, the normalised mean of ``template.format(name)`` embeddings over ``templates``."""
    if not class_names or not templates:
        raise DataError("zero-shot classification needs at least one class name and one template")
    texts = [t.format(name) for name in class_names for t in templates]
    per_template = embed_texts(model, texts).view(len(class_names), len(templates), -1)
    return torch.nn.functional.normalize(per_template.mean(1), dim=-1)


@torch.no_grad()
def classify(
    model: CLIPModel, images: torch.Tensor, class_names: Sequence[str], templates: Sequence[str] = TEMPLATES
) -> torch.Tensor:
    """Zero-shot class probabilities ``(N, K)`` of images ``(N, C, H, W)`` in [0, 1] over ``class_names``."""
    model.eval()
    logits = model.scale() * embed_images(model, images) @ class_embeddings(model, class_names, templates).T
    return logits.softmax(-1)


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


__all__ = ["TEMPLATES", "class_embeddings", "classify", "embed_images", "embed_texts", "rank_captions"]
