"""Multi-head self-attention in NumPy, self-contained: split heads, scaled dot products, softmax, combine.

Shapes: tokens ``(B, N, D)``, per head ``(B, H, N, d)`` with ``d = D / H``, weights ``(B, H, N, N)``.
Weight matrices act on the right (``x @ w``), as in the textbook.
"""

from __future__ import annotations

import numpy as np


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax: the maximum is subtracted before exponentiating."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def split_heads(x: np.ndarray, num_heads: int) -> np.ndarray:
    """``(B, N, H*d) -> (B, H, N, d)``."""
    b, tokens, dim = x.shape
    if dim % num_heads:
        raise ValueError(f"width {dim} is not divisible by num_heads={num_heads}: choose a head count that divides it")
    return x.reshape(b, tokens, num_heads, dim // num_heads).transpose(0, 2, 1, 3)


def combine_heads(x: np.ndarray) -> np.ndarray:
    """``(B, H, N, d) -> (B, N, H*d)``."""
    b, heads, tokens, head_dim = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, tokens, heads * head_dim)


def multihead_self_attention(
    x: np.ndarray,
    wq: np.ndarray,
    wk: np.ndarray,
    wv: np.ndarray,
    wo: np.ndarray,
    num_heads: int,
    bq: np.ndarray | float = 0.0,
    bk: np.ndarray | float = 0.0,
    bv: np.ndarray | float = 0.0,
    bo: np.ndarray | float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Tokens ``(B, N, D)`` -> ``(output (B, N, D), weights (B, H, N, N))``; weights ``(D, D)``, biases ``(D,)``."""
    q = split_heads(x @ wq + bq, num_heads)
    k = split_heads(x @ wk + bk, num_heads)
    v = split_heads(x @ wv + bv, num_heads)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    weights = softmax(scores, axis=-1)
    return combine_heads(weights @ v) @ wo + bo, weights
