"""The contrastive objective and the retrieval figures of an image-text model.

Symmetric InfoNCE (CLIP's loss) over a batch of ``B`` images and ``B'`` texts, with logits
``s_ij = exp(t) <u_i, v_j>``: cross-entropy of each image's row against its positive texts and of
each text's column against its positive images, averaged::

    L = 1/2 [ -1/B  sum_i sum_j p_ij  log softmax_j(s_i.)  - 1/B' sum_j sum_i q_ji log softmax_i(s_.j) ]

with ``p`` the positives of each image spread evenly (each row of ``P`` over its count), ``q`` those of
each text. ``P = I`` (the default) is CLIP's loss exactly; captions true of several images in the batch
("a red circle" twice) make several positives, not false negatives. A text true of no image in the
batch (a hard negative: "a blue circle" beside "a red circle") only competes in the images' rows; the
second sum runs over the ``B'`` texts with a positive.

Recall@k of a query is 1 when one of its ``k`` most similar gallery items is relevant.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...errors import DataError


def clip_loss(logits_per_image: torch.Tensor, positives: torch.Tensor | None = None) -> torch.Tensor:
    """Symmetric InfoNCE of logits ``(B, B')`` (row ``i`` image ``i``'s scores of every text); ``positives``
    ``(B, B')`` bool, default the identity (text ``i`` belongs to image ``i``, ``B = B'``). Every image
    needs a positive; a text with none is only a negative of the images."""
    logits = logits_per_image.float()
    if positives is None:
        if logits.shape[0] != logits.shape[1]:
            raise DataError(f"logits {tuple(logits.shape)} are not square: pass the positives of each image")
        target = torch.arange(len(logits), device=logits.device)
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2
    p = positives.float()
    if p.shape != logits.shape or not p.sum(1).all():
        raise DataError(
            f"positives {tuple(p.shape)} must match logits {tuple(logits.shape)} and give every image at least "
            f"one positive"
        )
    held = p.sum(0) > 0  # the texts true of some image in the batch
    per_text = p[:, held] / p[:, held].sum(0)
    return (F.cross_entropy(logits, p / p.sum(1, keepdim=True)) + F.cross_entropy(logits.T[held], per_text.T)) / 2


def recall_at_k(similarity: torch.Tensor, relevant: torch.Tensor, k: int) -> float:
    """The share of queries (rows of ``similarity (Q, G)``) with a relevant item (``relevant (Q, G)`` bool)
    among their ``k`` most similar gallery items."""
    top = similarity.topk(min(k, similarity.shape[1]), dim=1).indices
    return relevant.gather(1, top).any(1).float().mean().item()


def retrieval_metrics(
    image_embeddings: torch.Tensor, text_embeddings: torch.Tensor, relevant: torch.Tensor, ks: tuple[int, ...] = (1, 5)
) -> dict[str, float]:
    """``i2t_r{k}`` (each image finds a text true of it) and ``t2i_r{k}`` (each text finds an image it is
    true of) for embeddings ``(N, E)`` and ``(M, E)`` and ``relevant (N, M)`` (text ``j`` is true of image ``i``)."""
    similarity = image_embeddings.float() @ text_embeddings.float().T
    out = {}
    for k in ks:
        out[f"i2t_r{k}"] = recall_at_k(similarity, relevant, k)
        out[f"t2i_r{k}"] = recall_at_k(similarity.T, relevant.T, k)
    return out


__all__ = ["clip_loss", "recall_at_k", "retrieval_metrics"]
