"""Dense models: a backbone's ``forward_intermediates`` with a segmentation or detection head.

- ``model``: :class:`DenseConfig`, :class:`DenseModel` (backbone + head).
- ``heads``: linear per-patch, convolutional decoder, query mask classification, DETR.
- ``decoder``: the cross-attention transformer decoder and sine position embeddings.
"""

from .model import HEADS, DenseConfig, DenseModel

__all__ = ["HEADS", "DenseConfig", "DenseModel"]
