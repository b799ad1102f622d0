"""Image-text contrastive learning: a small CLIP on vitlab's engine.

- ``contrastive``: symmetric InfoNCE (:func:`clip_loss`), retrieval recall@k.
- ``zeroshot``: :func:`classify` from prompt templates (a class's best template or their mean),
  :func:`rank_captions` for one image.
- ``tower``: :func:`load_image_tower`, a timm / open_clip-style ViT's weights into the image side.
- ``train``: :class:`CLIPTask`, (``vitlab train --task clip``), :func:`evaluate_clip`.

The model is :class:`vitlab.models.CLIPModel`; the captioned data :mod:`vitlab.data.captions`.
"""

from .contrastive import clip_loss, recall_at_k, retrieval_metrics
from .tower import load_image_tower
from .train import CLIPTask, CLIPTrainConfig, build_clip_model, evaluate_clip
from .zeroshot import (
    ENSEMBLES,
    TEMPLATES,
    class_embeddings,
    classify,
    embed_images,
    embed_texts,
    rank_captions,
    template_embeddings,
)

__all__ = [
    "CLIPTask",
    "CLIPTrainConfig",
    "ENSEMBLES",
    "TEMPLATES",
    "build_clip_model",
    "class_embeddings",
    "classify",
    "clip_loss",
    "embed_images",
    "embed_texts",
    "evaluate_clip",
    "load_image_tower",
    "rank_captions",
    "recall_at_k",
    "retrieval_metrics",
    "template_embeddings",
]
